package testenv

import (
	"os"
	"strconv"
	"testing"
)

// EnvInt reads an integer knob of a test or benchmark from the environment: def when unset,
// a failure when it is not an integer of at least min.
func EnvInt(t testing.TB, name string, def, min int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		t.Fatalf("%s=%q: want an integer of at least %d", name, v, min)
	}
	return n
}
