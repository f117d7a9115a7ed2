// Package reconcile is the keyed work queue every hostplane daemon runs: a durable JetStream
// consumer turns events into keys, workers reconcile keys level-triggered.
//
//   - An event only names a key ("demo", "demo/workers"). The Reconciler reads current state and
//     converges; running it twice is harmless.
//   - A key is never reconciled by two workers at once; events for a key that is being
//     reconciled coalesce into one more run after it.
//   - A message is acknowledged only after a reconcile of its key that started after the
//     message arrived has succeeded, so a daemon restarted with the same durable consumer gets
//     back whatever it had not finished.
//   - Errors are retried with exponential backoff; Result.RequeueAfter schedules a later run;
//     a periodic resync enqueues every key the daemon owns, repairing anything a lost event
//     would miss.
//   - A malformed message (bad subject or envelope) is logged, counted and terminated: it never
//     crashes the daemon and never blocks the consumer.
//
// Across replicas of a daemon, per-key exclusivity comes from partitioning the subjects by
// cluster, so each replica owns a disjoint set of keys (see ARCHITECTURE §4).
package reconcile
