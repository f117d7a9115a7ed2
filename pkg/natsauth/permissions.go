package natsauth

import (
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/hostplane/hostplane/pkg/bus"
	"github.com/hostplane/hostplane/pkg/events"
)

// Identity is one NATS user: a name and what it may publish and subscribe to (nil
// Permissions: everything, for Admin).
type Identity struct {
	Name        string
	Permissions *server.Permissions
	// durables are the consumers of HOSTPLANE_EVENTS it owns, so that identities allowed
	// ephemeral consumers there are denied them (see Daemon.StreamsEvents).
	durables []string
}

// InboxPrefix is the reply subject prefix of an identity: _INBOX_<name>. ClientOptions sets
// it; the identity may subscribe to nothing else.
func InboxPrefix(name string) string { return "_INBOX_" + name }

const (
	jsAPI = "$JS.API."
	jsAck = "$JS.ACK."
	jsFC  = "$JS.FC."
)

// perms collects allowed subjects without duplicates.
type perms struct{ pub, sub, deny []string }

func (p *perms) allow(subjects ...string) {
	for _, s := range subjects {
		if !slices.Contains(p.pub, s) {
			p.pub = append(p.pub, s)
		}
	}
}

func (p *perms) permissions() *server.Permissions {
	out := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.pub},
		Subscribe: &server.SubjectPermission{Allow: p.sub},
	}
	if len(p.deny) > 0 {
		out.Publish.Deny = p.deny
	}
	return out
}

// streamInfo is looking a stream up.
func streamInfo(stream string) string { return jsAPI + "STREAM.INFO." + stream }

// ownStream is creating, updating and looking up a stream the identity alone uses.
func (p *perms) ownStream(stream string) {
	p.allow(jsAPI+"STREAM.CREATE."+stream, jsAPI+"STREAM.UPDATE."+stream, streamInfo(stream))
}

// ownBucket is creating and updating a KV bucket (which looks the account up first).
func (p *perms) ownBucket(bucket string) {
	p.ownStream("KV_" + bucket)
	p.allow(jsAPI + "INFO")
}

// durable is creating, following and acknowledging one durable pull consumer. The create
// subject carries the filter as extra tokens when there is exactly one.
func (p *perms) durable(stream, name string) {
	p.allow(
		jsAPI+"CONSUMER.CREATE."+stream+"."+name,
		jsAPI+"CONSUMER.CREATE."+stream+"."+name+".>",
		jsAPI+"CONSUMER.INFO."+stream+"."+name,
		jsAPI+"CONSUMER.MSG.NEXT."+stream+"."+name,
		jsAck+stream+"."+name+".>",
	)
}

// readBucket is opening, getting from, listing and watching a KV bucket. Watches are
// ordered push consumers with flow control. Gets are direct gets on one server, or message
// gets from the stream's leader on a NATS cluster (pkg/bus reads replicated buckets there).
func (p *perms) readBucket(bucket string) {
	stream := "KV_" + bucket
	p.allow(
		streamInfo(stream),
		jsAPI+"DIRECT.GET."+stream+".>",
		jsAPI+"STREAM.MSG.GET."+stream,
		jsAPI+"CONSUMER.CREATE."+stream+".>",
		jsAPI+"CONSUMER.DELETE."+stream+".*",
		jsFC+stream+".>",
	)
}

// writeBucket is readBucket and writing its keys.
func (p *perms) writeBucket(bucket string) {
	p.readBucket(bucket)
	p.allow("$KV." + bucket + ".>")
}

// ownLease is reading and writing the daemon's own key of the lease bucket (pkg/leader), and
// no other replica's.
func (p *perms) ownLease(daemon string) {
	stream := "KV_" + bus.BucketLeases
	key := "$KV." + bus.BucketLeases + "." + daemon
	p.allow(streamInfo(stream), jsAPI+"DIRECT.GET."+stream+"."+key, key)
}

// objectStore is putting, getting, listing and deleting the objects of a JetStream object
// store: its chunk and meta subjects, the last-message lookups of its metadata, the purge
// of replaced chunks and the ordered consumers that read objects and lists.
func (p *perms) objectStore(bucket string) {
	stream := "OBJ_" + bucket
	p.allow(
		streamInfo(stream),
		jsAPI+"STREAM.PURGE."+stream,
		jsAPI+"STREAM.MSG.GET."+stream,
		jsAPI+"DIRECT.GET."+stream+".>",
		jsAPI+"CONSUMER.CREATE."+stream+".>",
		jsAPI+"CONSUMER.DELETE."+stream+".*",
		jsAPI+"CONSUMER.INFO."+stream+".*",
		jsFC+stream+".>",
		"$O."+bucket+".>",
	)
}

// Identity returns the daemon's identity.
func (d Daemon) Identity() Identity {
	p := &perms{sub: []string{InboxPrefix(d.Name) + ".>"}}
	// Every daemon checks the shared streams at start (bus.EnsureStreams).
	p.allow(streamInfo(events.EventsStream), streamInfo(events.InboxStream))
	p.writeBucket(d.Owns)
	p.ownLease(d.Name)
	for _, b := range d.AlsoOwns {
		p.writeBucket(b)
	}
	for _, o := range d.ObjectStores {
		p.objectStore(o)
	}
	for _, b := range d.Reads {
		p.readBucket(b)
	}
	for _, r := range d.Publishes {
		p.allow(events.EventPrefix + ".*." + string(r) + ".*")
	}
	id := Identity{Name: d.Name}
	for _, c := range d.Consumers {
		p.durable(events.EventsStream, c)
		id.durables = append(id.durables, c)
	}
	// The outbox: a private work-queue stream and its relay consumer (pkg/outbox). The
	// bootstrap identity makes the stream; the daemon may not change it (a republish or a
	// source would publish past its permissions).
	ob := events.OutboxStream(d.Name)
	p.allow(streamInfo(ob))
	p.durable(ob, events.OutboxConsumer)
	p.allow(events.OutboxSubject(d.Name))
	if d.Inbound {
		p.durable(events.InboxStream, d.Name+"-inbox")
		dedup := events.DedupBucket(d.Name)
		p.writeBucket(dedup) // made by the bootstrap identity too
		p.allow(events.EventPrefix + ".*." + string(events.ResourceInbox) + "." + events.VerbInboxRejected)
	}
	if d.StreamsEvents {
		// Ephemeral ordered consumers with generated names, filtered to one cluster's events;
		// the durables of others are denied in Identities.
		s := events.EventsStream
		p.allow(
			jsAPI+"CONSUMER.CREATE."+s+".*."+events.EventPrefix+".>",
			jsAPI+"CONSUMER.DELETE."+s+".*",
			jsAPI+"CONSUMER.INFO."+s+".*",
			jsAPI+"CONSUMER.MSG.NEXT."+s+".*",
		)
	}
	if d.AuditsConsumers {
		s := events.EventsStream
		p.sub = append(p.sub, AdvisoryConsumerCreated(s)+".>")
		p.allow(streamInfo(s), jsAPI+"CONSUMER.LIST."+s, jsAPI+"CONSUMER.INFO."+s+".*", jsAPI+"CONSUMER.DELETE."+s+".*")
	}
	id.Permissions = p.permissions()
	return id
}

// AdvisoryConsumerCreated is the subject prefix of JetStream's advisories of consumers
// created on stream (one more token: the consumer's name).
func AdvisoryConsumerCreated(stream string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.CREATED." + stream
}

// BootstrapIdentity creates the shared layout (bus.EnsureLayout) and may do nothing else.
func BootstrapIdentity() Identity {
	p := &perms{sub: []string{InboxPrefix(Bootstrap) + ".>"}}
	for _, s := range []string{events.EventsStream, events.InboxStream} {
		p.ownStream(s)
	}
	for _, b := range append(bus.Buckets, bus.BucketLeases) {
		p.ownBucket(b)
	}
	for _, o := range bus.ObjectStores {
		p.ownStream("OBJ_" + o)
	}
	// Each daemon's outbox stream and, for an inbound owner, its dedup bucket (EnsureLayout).
	for _, d := range Daemons {
		p.ownStream(events.OutboxStream(d.Name))
		if d.Inbound {
			p.ownBucket(events.DedupBucket(d.Name))
		}
	}
	return Identity{Name: Bootstrap, Permissions: p.permissions()}
}

// AdminIdentity may do anything.
func AdminIdentity() Identity { return Identity{Name: Admin} }

// InboxPublisher is another system that sends inbound events: it may publish
// hostplane.in.<cluster>.> for each of clusters (every cluster when there are none), and
// receive JetStream's acknowledgements. Nothing else: no events, no KV, no stream API.
func InboxPublisher(name string, clusters ...string) Identity {
	p := &perms{sub: []string{InboxPrefix(name) + ".>"}}
	if len(clusters) == 0 {
		p.allow(events.InboxPrefix + ".>")
	}
	for _, c := range clusters {
		p.allow(events.InboxPrefix + "." + c + ".>")
	}
	return Identity{Name: name, Permissions: p.permissions()}
}

// EventConsumer is another system that reads hostplane's events through its own durable
// consumer on HOSTPLANE_EVENTS, named after it. It publishes nothing but the JetStream API
// calls of that consumer and its acknowledgements.
func EventConsumer(name string) Identity {
	p := &perms{sub: []string{InboxPrefix(name) + ".>"}}
	p.allow(streamInfo(events.EventsStream))
	p.durable(events.EventsStream, name)
	return Identity{Name: name, Permissions: p.permissions(), durables: []string{name}}
}

// Identities are the built-in identities (Names) followed by extra ones, with every
// identity that may make ephemeral consumers on HOSTPLANE_EVENTS denied the others' durables.
func Identities(extra ...Identity) []Identity {
	out := []Identity{BootstrapIdentity(), AdminIdentity()}
	for _, d := range Daemons {
		out = append(out, d.Identity())
	}
	out = append(out, extra...)
	for i, id := range out {
		d, ok := LookupDaemon(id.Name)
		if !ok || !d.StreamsEvents {
			continue
		}
		for _, other := range out {
			if other.Name == id.Name {
				continue
			}
			for _, c := range other.durables {
				s := jsAPI + "CONSUMER.*." + events.EventsStream + "." + c
				if _, daemon := LookupDaemon(other.Name); d.AuditsConsumers && !daemon {
					// It may read and delete another system's consumer (to delete a push
					// consumer), never create one of its names or take its messages; the
					// daemons' durables stay out of its reach.
					s = jsAPI + "CONSUMER.CREATE." + events.EventsStream + "." + c
				}
				out[i].Permissions.Publish.Deny = append(out[i].Permissions.Publish.Deny, s, s+".>", jsAPI+"CONSUMER.MSG.NEXT."+events.EventsStream+"."+c)
			}
		}
	}
	return out
}

// validName is the shape of an identity's name: it becomes a subject token and a file name.
func validName(name string) bool {
	return name != "" && len(name) <= 64 && !strings.ContainsAny(name, ".*> \t/\\") && strings.TrimLeft(name, "abcdefghijklmnopqrstuvwxyz0123456789-_") == ""
}
