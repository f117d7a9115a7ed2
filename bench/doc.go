// Package bench holds Hostplane's benchmarks and load harness. `make bench` runs them; the
// results, with the command that produced them, are kept in BENCHMARKS.md.
package bench
