// Package store is typed access to one JetStream KV bucket: JSON values, compare-and-swap on
// the key's revision, generation bumps on spec changes, listing and watching.
//
// Every daemon is the only writer of its bucket; a CAS conflict means another worker (or a
// replica) wrote first, so the caller re-reads and re-reconciles.
package store
