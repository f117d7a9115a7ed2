package audit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
)

// Query selects events of Read. Empty filters match everything.
type Query struct {
	// Limit is how many of the newest matching events to return (at least 1).
	Limit int
	// Since drops events whose StageTimestamp is before it (zero: none dropped).
	Since time.Time
	// User matches the username of the user or of the impersonated user.
	User string
	// Verb matches the event's verb ("create", "get", ...).
	Verb string
	// Resource matches objectRef's resource ("configmaps") or resource/subresource
	// ("pods/log").
	Resource string
}

func (q *Query) matches(e *api.AuditEvent) bool {
	if q.User != "" && e.User.Username != q.User && (e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != q.User) {
		return false
	}
	if q.Verb != "" && e.Verb != q.Verb {
		return false
	}
	if q.Resource != "" {
		r := e.ObjectRef
		if r == nil || (r.Resource != q.Resource && r.Resource+"/"+r.Subresource != q.Resource) {
			return false
		}
	}
	return true
}

// LogFile is the name of kube-apiserver replica n's audit log in a cluster's audit
// directory; kube-apiserver rotates it to "kube-apiserver-<n>-<time>.log" beside it.
func LogFile(n int) string { return api.ComponentKubeAPIServer + "-" + strconv.Itoa(n) + ".log" }

// Read returns the newest events of the audit logs in dir (every *.log file: each replica's
// current file and its rotated backups) that match q, oldest first. A directory that does not
// exist holds no events. Lines that are not events (a line being written) are skipped.
func Read(ctx context.Context, dir string, q Query) ([]api.AuditEvent, error) {
	q.Limit = max(q.Limit, 1)
	files, err := logFiles(dir)
	if err != nil {
		return nil, err
	}
	var found []api.AuditEvent
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A file last written before the oldest of Limit events found so far holds none of
		// the newest: every event in it is older than its modification time.
		if len(found) >= q.Limit {
			sortNewestFirst(found)
			found = found[:q.Limit]
			if f.modified.Before(found[q.Limit-1].StageTimestamp) {
				continue
			}
		}
		evs, err := readFile(ctx, f.path, q)
		if err != nil {
			return nil, err
		}
		found = append(found, evs...)
	}
	sortNewestFirst(found)
	found = found[:min(len(found), q.Limit)]
	slices.Reverse(found)
	return found, nil
}

type logFile struct {
	path     string
	modified time.Time
}

// logFiles lists dir's *.log files, the most recently written first.
func logFiles(dir string) ([]logFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []logFile
	for _, e := range entries {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) != ".log" {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) { // rotated away meanwhile
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, logFile{path: filepath.Join(dir, e.Name()), modified: info.ModTime()})
	}
	slices.SortFunc(out, func(a, b logFile) int { return b.modified.Compare(a.modified) })
	return out, nil
}

func sortNewestFirst(evs []api.AuditEvent) {
	slices.SortStableFunc(evs, func(a, b api.AuditEvent) int {
		return cmp.Or(b.StageTimestamp.Compare(a.StageTimestamp), strings.Compare(b.AuditID, a.AuditID))
	})
}

// readFile returns up to q.Limit of the newest events of one log file that match q, reading
// it from its end. kube-apiserver appends events in the order they happen, so reading stops
// at the first event before q.Since.
func readFile(ctx context.Context, path string, q Query) ([]api.AuditEvent, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) { // rotated away meanwhile
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []api.AuditEvent
	err = backward(f, func(line []byte) bool {
		var e api.AuditEvent
		if json.Unmarshal(line, &e) != nil || e.AuditID == "" {
			return true
		}
		if !q.Since.IsZero() && e.StageTimestamp.Before(q.Since) {
			return false
		}
		if q.matches(&e) {
			out = append(out, e)
		}
		return len(out) < q.Limit && ctx.Err() == nil
	})
	if err != nil {
		return nil, err
	}
	return out, ctx.Err()
}

// Reading backwards: chunk is how much is read at a time, maxLine the longest line kept (an
// event with a request body of the largest object etcd stores fits); longer ones are skipped.
const (
	chunk   = 64 << 10
	maxLine = 16 << 20
)

// backward calls fn with every non-empty line of f, without its newline, from the last to
// the first, until fn returns false.
func backward(f *os.File, fn func(line []byte) bool) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	var carry []byte // the start of the file's bytes read so far, up to its first newline
	skipping := false
	for off := info.Size(); off > 0; {
		step := min(chunk, off)
		off -= step
		buf := make([]byte, step, int(step)+len(carry))
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		buf = append(buf, carry...)
		for {
			i := bytes.LastIndexByte(buf, '\n')
			if i < 0 {
				break
			}
			line := buf[i+1:]
			buf = buf[:i]
			if skipping { // the start of an overlong line
				skipping = false
				continue
			}
			if len(line) > 0 && !fn(line) {
				return nil
			}
		}
		carry = buf
		if len(carry) > maxLine {
			carry, skipping = nil, true
		}
	}
	if len(carry) > 0 && !skipping {
		fn(carry)
	}
	return nil
}
