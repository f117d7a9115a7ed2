// Package portrange picks the ports a listener keeps across restarts: never from the
// kernel's ephemeral range.
//
// A port there is free only until a connection is made: the kernel gives the same range to
// outgoing connections as their local port, and a listener cannot bind a port an
// established connection holds (not even with SO_REUSEADDR). An apiserver, etcd member or
// load balancer whose port is recorded, and which starts again on it (a restart, a takeover,
// a wake), would find it taken for as long as that connection lasts.
package portrange

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
)

// ErrNoFreePort means no port of the range could be bound.
var ErrNoFreePort = errors.New("no free port")

// The ports handed out, when the kernel's ephemeral range leaves them out (Linux's default
// ephemeral range is 32768-60999): below 20000 are well-known services' ports (the kubelet's
// 10250, the admin ports 808x), and a control plane takes about ten.
const (
	rangeLow    = 20000
	minRangeLen = 2000
)

// EphemeralRangeFile is the kernel's range for outgoing connections' local ports.
const EphemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Range is the range of ports to hand out: from 20000 up to the kernel's ephemeral range, or
// above it when that leaves too few; the whole range above 1024 when the ephemeral range
// leaves no room at all (then a restarted listener may find its port taken).
func Range() (lo, hi int) {
	elo, ehi := 32768, 60999
	if b, err := os.ReadFile(EphemeralRangeFile); err == nil {
		var l, h int
		if n, _ := fmt.Sscan(string(b), &l, &h); n == 2 && l > 0 && h >= l {
			elo, ehi = l, h
		}
	}
	return Outside(elo, ehi)
}

// Outside picks the range to hand out around an ephemeral range [elo, ehi].
func Outside(elo, ehi int) (lo, hi int) {
	switch {
	case elo-1-rangeLow+1 >= minRangeLen:
		return rangeLow, elo - 1
	case 65535-(ehi+1)+1 >= minRangeLen:
		return ehi + 1, 65535
	default:
		return 1025, 65535
	}
}

// Pick returns a random port of [lo, hi] that taken does not hold and that a listener on
// host can bind now (the listener is closed at once). taken may be nil.
func Pick(host string, lo, hi int, taken func(int) bool) (int, error) {
	var last error
	for range 500 {
		port := lo + rand.IntN(hi-lo+1)
		if taken != nil && taken(port) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		_ = ln.Close()
		return port, nil
	}
	if last == nil {
		last = errors.New("every port tried is taken")
	}
	return 0, fmt.Errorf("%w on %s in %d-%d: %w", ErrNoFreePort, host, lo, hi, last)
}
