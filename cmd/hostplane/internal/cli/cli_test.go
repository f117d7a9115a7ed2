package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/client"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

func TestExitCode_MapsErrorsToTheDocumentedCodes(t *testing.T) {
	problem := func(status int, typ, detail string) error {
		return fmt.Errorf("wrapped: %w", &client.Error{Status: status, Problem: httpapi.Problem{
			Status: status, Type: httpapi.ProblemTypeBase + typ, Detail: detail}})
	}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"usage", &UsageError{Err: errors.New("bad flag")}, ExitUsage},
		{"timeout", &TimeoutError{Msg: "timed out"}, ExitTimeout},
		{"not found", problem(404, "not-found", `cluster "x" not found`), ExitNotFound},
		{"route missing", problem(404, "not-found", "no route for /v1/clusters/x/nodepools"), ExitError},
		{"unauthenticated", problem(401, "unauthenticated", "no token"), ExitAuth},
		{"forbidden", problem(403, "forbidden", "viewer"), ExitAuth},
		{"invalid", problem(400, "invalid", "bad"), ExitError},
		{"internal", problem(500, "internal", "oops"), ExitError},
		{"unreachable", client.ErrUnreachable, ExitError},
		{"other", errors.New("x"), ExitError},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("%s: ExitCode = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// execute runs the CLI in-process (no server needed for these).
func execute(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	for k, v := range env {
		t.Setenv(k, v)
	}
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestUnknownCommand_SuggestsTheNearestIncludingAliases(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"gte"}, "get"},
		{[]string{"desribe"}, "describe"},
		{[]string{"get", "clustrs"}, "clusters"},
		{[]string{"get", "componnets", "x"}, "components"},
		{[]string{"get", "nodepol", "x"}, "nodepools"},
		{[]string{"create", "clustr"}, "cluster"},
		{[]string{"delete", "nodepoll"}, "nodepool"},
	}
	for _, tt := range tests {
		_, _, err := execute(t, nil, tt.args...)
		if ExitCode(err) != ExitUsage {
			t.Errorf("%v: exit %d (%v), want usage", tt.args, ExitCode(err), err)
			continue
		}
		if !strings.Contains(err.Error(), "Did you mean this?\n\t"+tt.want) {
			t.Errorf("%v: %q does not suggest %s", tt.args, err, tt.want)
		}
	}
}

func TestUsageErrors_AreExitCode2(t *testing.T) {
	for _, args := range [][]string{
		{"get"},
		{"get", "clusters", "a", "b"},
		{"get", "components"},
		{"get", "clusters", "--bogus"},
		{"get", "clusters", "-o", "xml"},
		{"create", "cluster", "x"},
		{"upgrade", "cluster", "x"},
		{"hibernate", "cluster"},
		{"resume"},
		{"resume", "cluster", "a", "b"},
		{"scale", "nodepool", "w"},
		{"config", "set", "colour", "blue"},
		{"events", "x", "-o", "yaml"},
		{"get", "audit"},
		{"get", "audit", "x", "--limit", "0"},
		{"get", "audit", "x", "--limit", "1001"},
		{"get", "audit", "x", "--since", "-5m"},
	} {
		t.Setenv("XDG_CONFIG_HOME", t.TempDir())
		_, _, err := execute(t, nil, args...)
		if ExitCode(err) != ExitUsage {
			t.Errorf("%v: exit %d (%v), want %d", args, ExitCode(err), err, ExitUsage)
		}
	}
}

func TestConfig_SetViewAndPrecedence(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": dir, "HOSTPLANE_SERVER": "", "HOSTPLANE_TOKEN": "", "HOSTPLANE_CONFIG": ""}
	if _, _, err := execute(t, env, "config", "set", "server", "http://example.test:9000"); err != nil {
		t.Fatal(err)
	}
	out, _, err := execute(t, env, "config", "set", "token", "abcdefghijklmnopqrstuvwxyz")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "abcdefghijklmnopqrstuvwxyz") {
		t.Errorf("config set printed the token: %s", out)
	}
	path := filepath.Join(dir, "hostplane", "config.yaml")
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file %s: %v %v", path, st, err)
	}
	out, _, err = execute(t, env, "config", "view")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "efghijklmnop") || !strings.Contains(out, "REDACTED") || !strings.Contains(out, "in effect: server http://example.test:9000") {
		t.Errorf("config view:\n%s", out)
	}

	o := &Options{getenv: func(k string) string { return map[string]string{"XDG_CONFIG_HOME": dir}[k] }}
	server, token, err := o.resolve()
	if err != nil || server != "http://example.test:9000" || token != "abcdefghijklmnopqrstuvwxyz" {
		t.Errorf("from the file: %q %q %v", server, token, err)
	}
	o.getenv = func(k string) string {
		return map[string]string{"XDG_CONFIG_HOME": dir, "HOSTPLANE_SERVER": "http://env.test", "HOSTPLANE_TOKEN": "env-token"}[k]
	}
	if server, token, _ = o.resolve(); server != "http://env.test" || token != "env-token" {
		t.Errorf("env over file: %q %q", server, token)
	}
	o.server, o.token = "http://flag.test", "flag-token"
	if server, token, _ = o.resolve(); server != "http://flag.test" || token != "flag-token" {
		t.Errorf("flag over env: %q %q", server, token)
	}
	o = &Options{getenv: func(k string) string { return map[string]string{"XDG_CONFIG_HOME": t.TempDir()}[k] }}
	if server, token, _ = o.resolve(); server != client.DefaultServer || token != "" {
		t.Errorf("defaults: %q %q", server, token)
	}
}

func TestConfig_RejectsAnUnknownKeyInTheFile(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "hostplane"), 0o700)
	os.WriteFile(filepath.Join(dir, "hostplane", "config.yaml"), []byte("sever: http://x\n"), 0o600)
	o := &Options{getenv: func(k string) string { return map[string]string{"XDG_CONFIG_HOME": dir}[k] }}
	if _, _, err := o.resolve(); err == nil || !strings.Contains(err.Error(), "sever") {
		t.Errorf("err = %v, want it to name the unknown key", err)
	}
}

func TestHumanDuration_IsKubectlLike(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                    "0s",
		45 * time.Second:     "45s",
		119 * time.Second:    "119s",
		5*time.Minute + 3e9:  "5m3s",
		45 * time.Minute:     "45m",
		3*time.Hour + 5*60e9: "3h5m",
		30 * time.Hour:       "30h",
		50 * time.Hour:       "2d2h",
		20 * 24 * time.Hour:  "20d",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestProgress_PrintsPlainLinesOnlyWhenSomethingChanges(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b)
	p.update("waiting for Available: etcd 0/1", time.Second)
	p.update("waiting for Available: etcd 0/1", 2*time.Second)
	p.update("waiting for Available: etcd 1/1", 3*time.Second)
	p.end()
	want := "waiting for Available: etcd 0/1 (1s)\nwaiting for Available: etcd 1/1 (3s)\n"
	if b.String() != want {
		t.Errorf("progress =\n%q\nwant\n%q", b.String(), want)
	}
}

func TestNotServed_SaysTheRouteIsMissing(t *testing.T) {
	err := notServed(&client.Error{Status: http.StatusNotFound, Problem: httpapi.Problem{Status: 404,
		Type: httpapi.ProblemTypeBase + "not-found", Detail: "no route for /v1/clusters/c/nodepools"}}, routeNodePools)
	if err.Error() != "not available yet: the server has no /v1/clusters/{c}/nodepools route" || ExitCode(err) != ExitError {
		t.Errorf("err = %v (exit %d)", err, ExitCode(err))
	}
}
