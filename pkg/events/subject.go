package events

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Subject prefixes and the streams that capture them.
const (
	EventPrefix = "hostplane.evt" // hostplane.evt.<cluster>.<resource>.<verb>
	InboxPrefix = "hostplane.in"  // hostplane.in.<cluster>.<type...>

	EventsStream = "HOSTPLANE_EVENTS"
	InboxStream  = "HOSTPLANE_INBOX"
)

// Resource is the second-to-last token of an event subject.
type Resource string

// The resources hostplane publishes events about.
const (
	ResourceCluster   Resource = "cluster"
	ResourceNodePool  Resource = "nodepool"
	ResourceComponent Resource = "component"
	ResourcePKI       Resource = "pki"
	ResourceInfra     Resource = "infra"
	ResourceIgnition  Resource = "ignition"
	ResourceMachine   Resource = "machine"
	ResourceInbox     Resource = "inbox"
	ResourceBackup    Resource = "backup"
)

var resources = map[Resource]bool{
	ResourceCluster: true, ResourceNodePool: true, ResourceComponent: true, ResourcePKI: true,
	ResourceInfra: true, ResourceIgnition: true, ResourceMachine: true, ResourceInbox: true,
	ResourceBackup: true,
}

// isToken reports whether s may be a cluster name or verb in a subject: a DNS label, never a
// NATS wildcard or separator.
func isToken(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

// EventSubject is a parsed hostplane.evt subject.
type EventSubject struct {
	Cluster  string
	Resource Resource
	Verb     string
}

// String renders the subject.
func (s EventSubject) String() string {
	return EventPrefix + "." + s.Cluster + "." + string(s.Resource) + "." + s.Verb
}

// Validate checks every token.
func (s EventSubject) Validate() error {
	if !isToken(s.Cluster) {
		return fmt.Errorf("%w: cluster %q is not a DNS label", ErrBadSubject, s.Cluster)
	}
	if !resources[s.Resource] {
		return fmt.Errorf("%w: unknown resource %q", ErrBadSubject, s.Resource)
	}
	if !isToken(s.Verb) {
		return fmt.Errorf("%w: verb %q is not a lower-case token", ErrBadSubject, s.Verb)
	}
	return nil
}

// Subject builds hostplane.evt.<cluster>.<resource>.<verb>, validating each token.
func Subject(cluster string, resource Resource, verb string) (string, error) {
	s := EventSubject{Cluster: cluster, Resource: resource, Verb: verb}
	if err := s.Validate(); err != nil {
		return "", err
	}
	return s.String(), nil
}

// ParseSubject parses an event subject strictly: exactly five tokens, the prefix, a valid
// cluster, a known resource and a verb.
func ParseSubject(subject string) (EventSubject, error) {
	tok := strings.Split(subject, ".")
	if len(tok) != 5 || tok[0]+"."+tok[1] != EventPrefix {
		return EventSubject{}, fmt.Errorf("%w: %q is not %s.<cluster>.<resource>.<verb>", ErrBadSubject, subject, EventPrefix)
	}
	s := EventSubject{Cluster: tok[2], Resource: Resource(tok[3]), Verb: tok[4]}
	if err := s.Validate(); err != nil {
		return EventSubject{}, err
	}
	return s, nil
}

// ResourceFilter returns the subject filter for every event of one resource across clusters
// (resource "" means every resource): hostplane.evt.*.<resource>.>
func ResourceFilter(resource Resource) string {
	if resource == "" {
		return EventPrefix + ".>"
	}
	return EventPrefix + ".*." + string(resource) + ".>"
}

// ClusterEventsFilter returns the subject filter for every event of one cluster:
// hostplane.evt.<cluster>.>
func ClusterEventsFilter(cluster string) string {
	return EventPrefix + "." + cluster + ".>"
}

// InboxSubject builds hostplane.in.<cluster>.<type>, where type may have dots
// (for example "nodepool.scale").
func InboxSubject(cluster, typ string) (string, error) {
	if !isToken(cluster) {
		return "", fmt.Errorf("%w: cluster %q is not a DNS label", ErrBadSubject, cluster)
	}
	for _, t := range strings.Split(typ, ".") {
		if !isToken(t) {
			return "", fmt.Errorf("%w: inbound type %q has a bad token %q", ErrBadSubject, typ, t)
		}
	}
	return InboxPrefix + "." + cluster + "." + typ, nil
}

// ParseInboxSubject returns the cluster and type of hostplane.in.<cluster>.<type>.
func ParseInboxSubject(subject string) (cluster, typ string, err error) {
	rest, ok := strings.CutPrefix(subject, InboxPrefix+".")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not %s.<cluster>.<type>", ErrBadSubject, subject, InboxPrefix)
	}
	cluster, typ, ok = strings.Cut(rest, ".")
	if !ok {
		return "", "", fmt.Errorf("%w: %q has no type", ErrBadSubject, subject)
	}
	if _, err := InboxSubject(cluster, typ); err != nil {
		return "", "", err
	}
	return cluster, typ, nil
}

// Each daemon's outbox (pkg/outbox): a private work-queue stream HOSTPLANE_OUTBOX_<DAEMON>
// capturing hostplane.outbox.<daemon>, read by the durable consumer "relay".
const (
	OutboxPrefix       = "hostplane.outbox"
	OutboxStreamPrefix = "HOSTPLANE_OUTBOX_"
	OutboxConsumer     = "relay"
)

// OutboxStream is daemon's outbox stream.
func OutboxStream(daemon string) string { return OutboxStreamPrefix + strings.ToUpper(daemon) }

// OutboxSubject is the subject daemon records its events on.
func OutboxSubject(daemon string) string { return OutboxPrefix + "." + daemon }

// DedupBucket is the KV bucket where daemon remembers the inbound event ids it applied
// (pkg/inbox).
func DedupBucket(daemon string) string { return "inbox-" + daemon }
