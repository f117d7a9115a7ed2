// Package outbox makes "write state, then publish its event" crash-proof: a daemon records
// the event durably in JetStream before it writes the KV key the event is about and sends it
// after the write, and a relay publishes every recorded event to HOSTPLANE_EVENTS (a
// duplicate when it was sent) and forgets each one only after the events stream acknowledged
// it. Every daemon has one Outbox (pkg/daemon makes it and runs its relay); nothing in
// hostplane publishes a state-change event any other way.
//
// # Where the state lives
//
// Each daemon owns one work-queue stream, HOSTPLANE_OUTBOX_<DAEMON> on the subject
// hostplane.outbox.<daemon> (StreamConfig), with as many replicas as HOSTPLANE_NATS_REPLICAS
// asks for. An entry is one message: the CloudEvent exactly as it will be published, the
// subject it goes to (header Hostplane-Subject) and the trace context of the span that
// recorded it (traceparent). Only the owning daemon writes its stream, so "each daemon is the
// only writer of its own state" stays true and a NATS permission per daemon can say so:
// publish hostplane.outbox.<daemon>, consume its own stream's "relay" consumer. A stream and
// not a KV bucket, because a work queue is exactly an outbox: the entry disappears when the
// relay acknowledges it, a crashed relay's unacknowledged entry is delivered again, and
// entries come out in the order they were recorded.
//
// # Why the pair is never split by a crash
//
// A write goes in three steps: Record the event, write the state (store.Create, Update,
// Delete; with store.MutateBefore the record happens inside the compare-and-swap loop, once
// the new value is known, just before it is written), then Send the entry, which publishes it
// at once with the caller's trace:
//
//   - a crash before the record loses nothing: neither happened;
//   - a crash between the record and the write leaves an event about a write that did not
//     happen, and so does a write that fails (a CAS conflict, NATS gone). That is harmless:
//     events are level-triggered ("key K changed"), every consumer re-reads K and converges
//     on what is stored, so an extra event costs one idempotent reconcile;
//   - a crash after the write and before Send (or a Send that fails) leaves the entry in the
//     stream, and the relay publishes it: the restarted daemon's, or another replica's.
//
// Writing first and recording second could lose the event; recording atomically with the
// write would need a batch across two streams, which JetStream does not offer.
//
// The relay publishes an entry only once it is Config.Settle old (5s by default). Were it to
// publish a fresh entry at once, a consumer could read the key before the writer stored the
// change, and the writer's own Send, a duplicate by then, would not wake it again. The
// writer thus has Settle to store its change; a writer slower than that still converges
// through the consumers' periodic resync. A redelivered entry (its relay died), and one
// left by an earlier process, goes out without waiting.
//
// # Published once
//
// Send and the relay both publish with Nats-Msg-Id set to the event's id, which is fixed when
// the event is recorded (the entry itself is recorded under that id too, so the outbox stores
// a retried record once). HOSTPLANE_EVENTS remembers ids for bus.DuplicateWindow (2 minutes)
// and drops a second publish: the relay's publish of an entry the writer sent, or the next
// relay's publish of an entry whose relay died after publishing and before acknowledging.
// So each event is stored once in HOSTPLANE_EVENTS, provided its second publish comes within
// that window; a relay held up longer than the window (behind an entry the events stream
// keeps refusing) may store a second copy, which level-triggered consumers absorb.
//
// # The relay
//
// Outbox.Start is the relay, a daemon.Runnable: it runs until its context ends and then
// returns nil, leaving unpublished entries for the next start. It publishes every entry, the
// sent ones too (as duplicates), and removes each once the events stream acknowledged it. It
// reads the stream through one durable consumer, "relay", that allows a single
// unacknowledged entry, so it publishes one entry at a time in the order they were recorded,
// even with several replicas of a daemon sharing the consumer. Events about one key thus
// reach HOSTPLANE_EVENTS in the order of their writes (one key is written by one worker at a
// time), except that an event whose Send failed comes after later ones that were sent; a
// consumer re-reads the key either way. A publish that fails (the events stream unavailable,
// NATS reconnecting) is retried with the backoff of k8s.io/apimachinery/pkg/util/wait (100ms
// doubling to 5s, jittered), keeping the entry (InProgress) meanwhile; the entries behind it
// wait. An entry left by a relay that died is delivered again after AckWait (30s by default).
// On start the relay publishes whatever a previous process left behind. An entry that is not
// an event (never written by Record) is terminated and logged. The daemon stops the relay
// with its other parts, before its HTTP server: an entry recorded by a request still in
// flight and not sent waits in the outbox for the next start.
//
// Metrics, labelled with the daemon: hostplane_outbox_pending (entries recorded and not yet
// published, as the relay last saw them), hostplane_outbox_published_total (entries the
// relay published and removed) and hostplane_outbox_publish_failures_total (failed attempts
// of Send and of the relay).
//
// # Tracing
//
// Send publishes inside the caller's span, with a producer span, as daemons always did.
// Record also stores the caller's trace context with the entry, for the relay: it publishes
// with a producer span ("publish <type>", by the daemon's tracer provider) whose parent is
// that recorded context, and the published message carries the producer span in its headers
// (an entry recorded outside any trace is published without a span). A request's trace thus
// follows the event to the consumers whichever of the two publishes first.
package outbox
