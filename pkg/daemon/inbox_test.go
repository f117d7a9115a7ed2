package daemon_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/inbox"
)

func TestInboundResult_RejectsTheCallersMistakes_RetriesTheRest(t *testing.T) {
	cause := errors.New("nats: timeout")
	for _, tc := range []struct {
		name, notFound, want string
		err                  error
		rejected             bool
	}{
		{name: "ok"},
		{name: "not found, own text", notFound: "cluster demo does not exist", err: api.Errorf(api.CodeNotFound, "no such pool"), rejected: true, want: "cluster demo does not exist"},
		{name: "not found, the error's text", err: api.Errorf(api.CodeNotFound, "no such pool"), rejected: true, want: "no such pool"},
		{name: "invalid", err: api.Errorf(api.CodeInvalid, "bad version"), rejected: true, want: api.Errorf(api.CodeInvalid, "bad version").Error()},
		{name: "other", err: cause, want: "upgrade cluster demo: nats: timeout"},
	} {
		err := daemon.InboundResult(tc.err, tc.notFound, "upgrade cluster demo")
		var re *inbox.RejectError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", tc.name, err)
		case tc.rejected && (!errors.As(err, &re) || re.Reason != tc.want):
			t.Errorf("%s: %v, want the rejection %q", tc.name, err, tc.want)
		case !tc.rejected && tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, cause)):
			t.Errorf("%s: %v, want %q wrapping the cause", tc.name, err, tc.want)
		}
	}
}

func TestEnvAs_ParsesTheVariable_ElseTheDefault(t *testing.T) {
	t.Setenv("HOSTPLANE_TEST_TTL", "90s")
	if got := daemon.EnvAs("HOSTPLANE_TEST_TTL", time.Hour, time.ParseDuration); got != 90*time.Second {
		t.Errorf("set: %v", got)
	}
	t.Setenv("HOSTPLANE_TEST_TTL", "soon")
	if got := daemon.EnvAs("HOSTPLANE_TEST_TTL", time.Hour, time.ParseDuration); got != time.Hour {
		t.Errorf("unparsable: %v", got)
	}
	t.Setenv("HOSTPLANE_TEST_TTL", "")
	if got := daemon.EnvAs("HOSTPLANE_TEST_TTL", time.Hour, time.ParseDuration); got != time.Hour {
		t.Errorf("empty: %v", got)
	}
}
