package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/atomicfile"
)

// MintedFile lists, beside the seeds, the identities minted for other systems (Mint); Generate
// reads it, so they survive a restart and reach the server's configuration with the built-in
// ones.
const MintedFile = "identities.json"

// The kinds of identity another system may hold.
const (
	// KindInboxPublisher may only publish inbound events (InboxPublisher).
	KindInboxPublisher = "inbox-publisher"
	// KindEventConsumer may only read the events through its own durable (EventConsumer).
	KindEventConsumer = "event-consumer"
)

// Kinds are the kinds Mint accepts.
var Kinds = []string{KindInboxPublisher, KindEventConsumer}

// Minted is an identity minted for another system.
type Minted struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Clusters confine an inbox publisher to these clusters' inbound subjects; none: every
	// cluster.
	Clusters []string  `json:"clusters,omitempty"`
	Created  time.Time `json:"created"`
}

// Identity is what m may do.
func (m Minted) Identity() (Identity, error) {
	switch m.Kind {
	case KindInboxPublisher:
		return InboxPublisher(m.Name, m.Clusters...), nil
	case KindEventConsumer:
		if len(m.Clusters) > 0 {
			return Identity{}, fmt.Errorf("%w: an event consumer reads every cluster's events; --cluster is for inbox publishers", ErrBadIdentity)
		}
		return EventConsumer(m.Name), nil
	}
	return Identity{}, fmt.Errorf("%w: kind %q; valid kinds: %v", ErrBadIdentity, m.Kind, Kinds)
}

// ListMinted returns the identities minted in dir, oldest first.
func ListMinted(dir string) ([]Minted, error) {
	b, err := os.ReadFile(filepath.Join(dir, MintedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nats credentials: %w", err)
	}
	var out []Minted
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("nats credentials: %s: %w", filepath.Join(dir, MintedFile), err)
	}
	return out, nil
}

// Mint adds an identity for another system to dir: its seed (mode 0600, at
// Credentials.SeedFile), its entry in MintedFile and its user in auth.conf. The server accepts
// it once it reloads its configuration (a standalone nats-server on SIGHUP; hostplane dev on its
// own within seconds). A name already in use is ErrIdentityExists.
func Mint(dir string, m Minted) (*Credentials, error) {
	if !validName(m.Name) {
		return nil, fmt.Errorf("nats credentials: %w: %q", ErrBadName, m.Name)
	}
	for _, c := range m.Clusters {
		if err := api.ValidateClusterName(c); err != nil {
			return nil, fmt.Errorf("nats credentials: %w: cluster %q: %v", ErrBadIdentity, c, err)
		}
	}
	if _, err := m.Identity(); err != nil {
		return nil, err
	}
	if slices.Contains(Names(), m.Name) {
		return nil, fmt.Errorf("nats credentials: %w: %q is a built-in identity", ErrIdentityExists, m.Name)
	}
	if d, ok := reservedBy(m.Name); ok {
		return nil, fmt.Errorf("nats credentials: %w: %q: names starting with %q are %s's (its durable consumers, such as %s)",
			ErrIdentityExists, m.Name, d.Name+"-", d.Name, strings.Join(d.durables(), ", "))
	}
	minted, err := ListMinted(dir)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(minted, func(o Minted) bool { return o.Name == m.Name }) {
		return nil, fmt.Errorf("nats credentials: %w: %q", ErrIdentityExists, m.Name)
	}
	if m.Created.IsZero() {
		m.Created = time.Now().UTC().Truncate(time.Second)
	}
	// A seed left behind by an earlier identity of the same name must not come back to life.
	if err := os.Remove(filepath.Join(dir, m.Name+SeedExt)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("nats credentials: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nats credentials: %w", err)
	}
	if err := writeMinted(dir, append(minted, m)); err != nil {
		return nil, err
	}
	return Generate(dir)
}

// reservedBy returns the daemon whose names name would take: a daemon's durable consumers
// are named after it (clusterd, clusterd-inbox, infrad-localcluster), and a minted event
// consumer's durable carries the identity's name, so a minted "<daemon>-…" could read and
// acknowledge a daemon's events in its place.
func reservedBy(name string) (Daemon, bool) {
	for _, d := range Daemons {
		if name == d.Name || strings.HasPrefix(name, d.Name+"-") || strings.HasPrefix(name, d.Name+"_") {
			return d, true
		}
	}
	return Daemon{}, false
}

// durables are the daemon's durable consumers, on every stream.
func (d Daemon) durables() []string {
	out := slices.Clone(d.Consumers)
	if d.Inbound {
		out = append(out, d.Name+"-inbox")
	}
	return out
}

// Revoke removes a minted identity from dir: its entry, its seed and its user in auth.conf.
// Once the server reloads its configuration it refuses the identity and closes its open
// connections. Built-in identities cannot be revoked (delete the seed and run Generate to
// rotate one); an unknown name is ErrUnknownIdentity.
func Revoke(dir, name string) (*Credentials, error) {
	if slices.Contains(Names(), name) {
		return nil, fmt.Errorf("nats credentials: %w: %q is a built-in identity; to rotate its key, delete %s and restart", ErrBadIdentity, name, name+SeedExt)
	}
	minted, err := ListMinted(dir)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(minted, func(o Minted) bool { return o.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("nats credentials: %w: %q", ErrUnknownIdentity, name)
	}
	if err := writeMinted(dir, slices.Delete(minted, i, i+1)); err != nil {
		return nil, err
	}
	c, err := Generate(dir)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(c.SeedFile(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("nats credentials: %w", err)
	}
	return c, nil
}

func writeMinted(dir string, minted []Minted) error {
	b, err := json.MarshalIndent(minted, "", "  ")
	if err != nil {
		return fmt.Errorf("nats credentials: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, MintedFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("nats credentials: %w", err)
	}
	return nil
}

// mintedIdentities are the identities of dir's MintedFile.
func mintedIdentities(dir string) ([]Identity, error) {
	minted, err := ListMinted(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Identity, 0, len(minted))
	for _, m := range minted {
		id, err := m.Identity()
		if err != nil {
			return nil, fmt.Errorf("nats credentials: %s: %s: %w", MintedFile, m.Name, err)
		}
		out = append(out, id)
	}
	return out, nil
}
