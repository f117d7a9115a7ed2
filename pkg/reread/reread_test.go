package reread_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/reread"
)

var errEmpty = errors.New("empty")

func parse(b []byte) (string, error) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errEmpty
	}
	return s, nil
}

func write(t *testing.T, path, s string) {
	t.Helper()
	// A new file renamed over the old one, as a Secret volume and atomic writers do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, f *reread.File[string]) (string, error) {
	t.Helper()
	return f.Get()
}

func TestFile_FollowsTheFileAndKeepsTheLastGoodValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if _, err := reread.New(path, parse); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("New of a missing file: %v, want an error naming it", err)
	}
	write(t, path, "one\n")
	f, err := reread.New(path, parse)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := get(t, f); v != "one" || err != nil {
		t.Fatalf("Get = %q, %v; want one", v, err)
	}

	write(t, path, "two\n")
	if v, err := get(t, f); v != "two" || err != nil {
		t.Fatalf("after a rewrite Get = %q, %v; want two", v, err)
	}

	write(t, path, "  \n")
	if v, err := get(t, f); v == "" || !errors.Is(err, errEmpty) || !strings.Contains(err.Error(), path) {
		t.Fatalf("after an invalid rewrite Get = %q, %v; want the last good value and the parse error naming the file", v, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if v, err := get(t, f); v == "" || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after removal Get = %q, %v; want the last good value and ErrNotExist", v, err)
	}
	write(t, path, "three")
	if v, err := get(t, f); v != "three" || err != nil {
		t.Fatalf("after the file came back Get = %q, %v; want three", v, err)
	}
}
