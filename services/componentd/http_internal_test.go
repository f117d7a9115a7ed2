package componentd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTailFile_ReturnsTheLastLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	var b strings.Builder
	for i := range 100000 { // several read chunks
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		n     int
		first string
	}{{1, "line 99999"}, {3, "line 99997"}, {5000, "line 95000"}, {200000, "line 0"}} {
		got, err := tailFile(path, tt.n)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		if want := min(tt.n, 100000); len(lines) != want || lines[0] != tt.first || lines[len(lines)-1] != "line 99999" {
			t.Errorf("tail %d: %d lines from %q to %q", tt.n, len(lines), lines[0], lines[len(lines)-1])
		}
	}
	if _, err := tailFile(filepath.Join(t.TempDir(), "missing"), 1); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}
