package natsauth

import (
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// Usage is what one identity did on a server: the subjects it published to and subscribed
// to (recorded from the server's trace by pkg/testenv).
type Usage struct {
	Publish   []string
	Subscribe []string
}

// Unused returns the identity's allowed publish subjects that no subject in u matches: a
// permission the code never needed in the run that produced u.
func (id Identity) Unused(u Usage) []string {
	if id.Permissions == nil || id.Permissions.Publish == nil {
		return nil
	}
	var out []string
	for _, allow := range id.Permissions.Publish.Allow {
		if !slices.ContainsFunc(u.Publish, func(s string) bool { return server.SubjectMatchesFilter(s, allow) }) {
			out = append(out, allow)
		}
	}
	return out
}

// Who names the identity whose public key appears in a server log line ("unknown" for
// none): the server writes the user's key in every client's log prefix.
func (c *Credentials) Who(line string) string {
	for name, pub := range c.public {
		if strings.Contains(line, pub) {
			return name
		}
	}
	return "unknown"
}

// Identity returns the identity called name.
func (c *Credentials) Identity(name string) (Identity, bool) {
	i := slices.IndexFunc(c.identities, func(id Identity) bool { return id.Name == name })
	if i < 0 {
		return Identity{}, false
	}
	return c.identities[i], true
}
