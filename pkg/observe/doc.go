// Package observe builds the three observability pipes every hostplane daemon owns: a log/slog
// JSON logger that stamps records with the current trace, a Prometheus registry (one per daemon,
// never the global default), and an OpenTelemetry tracer provider whose trace context travels in
// NATS message headers.
//
// Nothing here touches OpenTelemetry's or Prometheus's global state: several daemons run in one
// process under `hostplane dev` and in tests, and each must keep its own pipes.
package observe
