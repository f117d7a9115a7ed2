package dev

import (
	"os"
	"strings"
	"testing"
)

// The CoreDNS hostplane dev pushes is the one tools/coredns/build.sh builds.
func TestCoreDNSVersion_IsTheOneToolsCorednsPins(t *testing.T) {
	b, err := os.ReadFile("../../../tools/coredns/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if want := "require github.com/coredns/coredns " + CoreDNSVersion + "\n"; !strings.Contains(string(b), want) {
		t.Fatalf("tools/coredns/go.mod does not pin CoreDNS %s:\n%s", CoreDNSVersion, b)
	}
}
