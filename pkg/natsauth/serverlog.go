package natsauth

import (
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerLog is an embedded server's logger (bus.EmbeddedConfig.Logger): it keeps the
// permission violations, naming the identity, and, when the server traces, what each
// identity publishes and subscribes to. The rest of the server's log is dropped.
type ServerLog struct {
	creds      *Credentials
	mu         sync.Mutex
	violations []string
	usage      map[string]Usage
	// OnViolation, when set, is called with each violation as it happens.
	OnViolation func(identity, line string)
}

// NewServerLog returns a logger that names the identities of c.
func NewServerLog(c *Credentials) *ServerLog {
	return &ServerLog{creds: c, usage: map[string]Usage{}}
}

// SetCredentials makes the log name the identities of c (after a reload of the server's users).
func (l *ServerLog) SetCredentials(c *Credentials) {
	l.mu.Lock()
	l.creds = c
	l.mu.Unlock()
}

var _ server.Logger = (*ServerLog)(nil)

func (l *ServerLog) Noticef(string, ...any) {}
func (l *ServerLog) Warnf(string, ...any)   {}
func (l *ServerLog) Fatalf(string, ...any)  {}
func (l *ServerLog) Debugf(string, ...any)  {}

// Errorf keeps "Publish Violation" and "Subscription Violation" lines, naming the identity.
func (l *ServerLog) Errorf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if !strings.Contains(line, "Violation") {
		return
	}
	l.mu.Lock()
	who := l.creds.Who(line)
	l.violations = append(l.violations, who+": "+line)
	l.mu.Unlock()
	if l.OnViolation != nil {
		l.OnViolation(who, line)
	}
}

// Tracef records "<<- [PUB subject ...]", "<<- [HPUB subject ...]" and "<<- [SUB subject ...]".
func (l *ServerLog) Tracef(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	_, op, ok := strings.Cut(line, "<<- [")
	if !ok {
		return
	}
	f := strings.Fields(op)
	if len(f) < 2 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	who := l.creds.Who(line)
	u := l.usage[who]
	switch f[0] {
	case "PUB", "HPUB":
		u.Publish = append(u.Publish, f[1])
	case "SUB":
		u.Subscribe = append(u.Subscribe, f[1])
	default:
		return
	}
	l.usage[who] = u
}

// Violations are the permission violations so far, each prefixed with the identity.
func (l *ServerLog) Violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.violations...)
}

// Usage is what each identity published and subscribed to so far (a tracing server only).
func (l *ServerLog) Usage() map[string]Usage {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Usage, len(l.usage))
	for k, v := range l.usage {
		out[k] = Usage{Publish: append([]string(nil), v.Publish...), Subscribe: append([]string(nil), v.Subscribe...)}
	}
	return out
}
