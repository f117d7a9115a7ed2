// Package leader makes one replica of a daemon the one that works, with a lease in a NATS KV
// bucket (bus.BucketLeases) whose entries JetStream expires TTL after their last write.
//
// Every replica of a daemon connects, serves its health endpoints and then asks for the
// lease named after the daemon. The holder renews it every TTL/5; the others look every
// RetryPeriod and take it once it is gone, which happens in three ways:
//
//   - the holder stops (SIGTERM, Ctrl-C): it deletes the lease after its parts have stopped,
//     so a standby takes over within RetryPeriod;
//   - the holder dies (kill -9, a lost node): JetStream expires the lease TTL after its last
//     renewal, and a standby takes over at most RetryPeriod later;
//   - the holder cannot renew for RenewDeadline (NATS unreachable): it stops working before
//     the lease can expire (RenewDeadline < TTL), so two replicas never work at once.
//
// A replica restarted with the same identity (the same pod or container, or hostplane dev on
// the same data dir) finds the lease still naming it and takes it back at once: whatever
// held it under that identity is gone.
package leader
