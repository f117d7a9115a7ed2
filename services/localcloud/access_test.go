package localcloud

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/atomicfile"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/auth/authtest"
	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestCloud_OnTCPAnswersOnlyTheHolderOfItsToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "localcloud.token")
	write := func(path, token string) {
		t.Helper()
		if err := atomicfile.Write(path, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first := auth.GenerateToken()
	write(tokenFile, first)
	c, err := New(Config{Dir: dir, Listen: "127.0.0.1:0", TokenFile: tokenFile,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, "localcloud", c.Run)
	select {
	case <-c.Ready():
	case <-time.After(time.Minute):
		t.Fatal("local cloud not listening")
	}
	status := func(method, path, token string) int { return authtest.Status(t, method, c.URL()+path, token) }
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/machines", "", 401},
		{"GET", "/metrics", "", 401},
		{"GET", "/instancetypes", "", 401},
		{"DELETE", "/machines/c1/m1", "", 401},
		{"POST", "/machines/c1/m1/fault", "wrong-0123456789abcdef", 401},
		{"GET", "/machines", first, 200},
		{"GET", "/metrics", first, 200},
	} {
		if got := status(tc.method, tc.path, tc.token); got != tc.want {
			t.Errorf("%s %s (token %t) = %d, want %d", tc.method, tc.path, tc.token != "", got, tc.want)
		}
	}

	// infrad's client: with the file, it is let in; without, it is told why it is not.
	withFile, err := NewClient(c.URL(), WithTokenFile(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withFile.List(t.Context(), ""); err != nil {
		t.Fatalf("a client with the token file: %v", err)
	}
	without, err := NewClient(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := without.List(t.Context(), ""); err == nil || !strings.Contains(err.Error(), EnvTokenFile) {
		t.Fatalf("a client without the token: %v, want a refusal naming %s", err, EnvTokenFile)
	}

	// Rotation: the file both sides read is replaced; the old token is refused from the next
	// request, and the client, reading the same file, follows.
	second := auth.GenerateToken()
	write(tokenFile, second)
	if got := status("GET", "/machines", first); got != 401 {
		t.Errorf("the old token after rotation: %d, want 401", got)
	}
	if _, err := withFile.List(t.Context(), ""); err != nil {
		t.Fatalf("the client after rotation: %v", err)
	}

	if _, err := NewClient(c.URL(), WithTokenFile(filepath.Join(dir, "missing"))); !errors.Is(err, ErrInvalid) {
		t.Errorf("a client with a missing token file: %v, want ErrInvalid", err)
	}
	write(filepath.Join(dir, "short"), "short")
	if _, err := New(Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", TokenFile: filepath.Join(dir, "short")}); !errors.Is(err, auth.ErrBadToken) {
		t.Errorf("a cloud with a 5-character token: %v, want ErrBadToken", err)
	}
}

func TestCommand_OnATCPAddressNeedsATokenFileOrInsecureNoAuth(t *testing.T) {
	t.Setenv(EnvTokenFile, "")
	var stderr strings.Builder
	err := Command(t.Context(), []string{"--dir", t.TempDir(), "--listen", "127.0.0.1:0"}, &stderr)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--token-file") || !strings.Contains(err.Error(), "--insecure-no-auth") {
		t.Fatalf("Command on TCP without a token: %v, want a usage error naming --token-file and --insecure-no-auth", err)
	}
}
