// Package bus connects hostplane to NATS JetStream: connect with retry, an embedded
// JetStream server (hostplane dev and tests), idempotent creation of the event streams and of
// one KV bucket per owner, and publishing CloudEvents with Nats-Msg-Id de-duplication and the
// trace context in the message headers.
package bus
