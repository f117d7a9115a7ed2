package portrange

import (
	"fmt"
	"net"
	"os"
	"testing"
)

func TestOutside_LeavesTheEphemeralRangeOut(t *testing.T) {
	for _, tt := range []struct{ elo, ehi, lo, hi int }{
		{32768, 60999, 20000, 32767}, // Linux's default
		{15000, 50000, 50001, 65535}, // too little room below: above it
		{1024, 65000, 1025, 65535},   // no room: the whole range
		{49152, 65535, 20000, 49151}, // IANA's dynamic ports
	} {
		if lo, hi := Outside(tt.elo, tt.ehi); lo != tt.lo || hi != tt.hi {
			t.Errorf("ephemeral %d-%d: range %d-%d, want %d-%d", tt.elo, tt.ehi, lo, hi, tt.lo, tt.hi)
		}
	}
}

// Pick never returns a port outside the range, one the caller holds, or one a listener
// holds now.
func TestPick_SkipsTakenAndBoundPorts(t *testing.T) {
	b, err := os.ReadFile(EphemeralRangeFile)
	if err != nil {
		t.Fatalf("the kernel's ephemeral range: %v", err)
	}
	var elo, ehi int
	if _, err := fmt.Sscan(string(b), &elo, &ehi); err != nil {
		t.Fatalf("%s: %q: %v", EphemeralRangeFile, b, err)
	}
	lo, hi := Range()
	// A narrow window of the range: one port a listener holds, one the caller holds, one free.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bound := ln.Addr().(*net.TCPAddr).Port
	for range 50 {
		p, err := Pick("127.0.0.1", lo, hi, func(p int) bool { return p == lo })
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p > hi || p == lo || (p >= elo && p <= ehi) {
			t.Fatalf("picked %d: range %d-%d, ephemeral %d-%d, taken %d", p, lo, hi, elo, ehi, lo)
		}
	}
	if _, err := Pick("127.0.0.1", bound, bound, nil); err == nil {
		t.Fatalf("picked port %d a listener holds", bound)
	}
	if p, err := Pick("127.0.0.1", lo, lo+1, func(p int) bool { return p == lo }); err == nil && p != lo+1 {
		t.Fatalf("picked %d of %d-%d with %d taken", p, lo, lo+1, lo)
	}
	if _, err := Pick("127.0.0.1", lo, lo, func(int) bool { return true }); err == nil {
		t.Fatal("picked a port when every one is taken")
	}
}
