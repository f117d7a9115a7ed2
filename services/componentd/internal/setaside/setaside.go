// Package setaside keeps an in-place etcd restore from losing data: before the members are
// restored, each one's data directory is moved aside (<dir>.before-restore) once per
// request, with a marker recording the request and which members had data, so that a
// retry, a restart or a crash at any step never touches what was set aside, and a
// cancelled request puts it back exactly as it was.
package setaside

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/hostplane/hostplane/pkg/atomicfile"
)

// Aside is where the data of the member whose data directory is dataDir is set aside.
func Aside(dataDir string) string { return dataDir + ".before-restore" }

// Progress is the content of the marker.
type Progress struct {
	// Request is the request's id: a later request is another restore.
	Request string `json:"request"`
	// HadData are the members (indexes into the data directories) whose data directory
	// existed before the restore (set aside); the others had none, and have none again if
	// it is cancelled.
	HadData []int `json:"hadData"`
	// Done: every member is restored; only removing the request is left.
	Done bool `json:"done,omitempty"`
}

// Write replaces the marker with p at once.
func Write(marker string, p *Progress) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return atomicfile.Write(marker, b, 0o600)
}

// Read returns the marker's progress, nil when there is none.
func Read(marker string) (*Progress, error) {
	b, err := os.ReadFile(marker)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Progress
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", marker, err)
	}
	return &p, nil
}

// Begin moves each member's data directory aside for the request id, once: the first time
// for a request (p nil) it drops the asides of an earlier, finished restore and records in
// the marker which members have data; on a retry (p the marker's) it keeps the asides
// (they are this request's) and drops what the failed attempt restored. Afterwards no
// member has a data directory.
func Begin(marker string, dataDirs []string, id string, p *Progress) (*Progress, error) {
	if p == nil {
		p = &Progress{Request: id, HadData: []int{}}
		for n, dir := range dataDirs {
			if err := os.RemoveAll(Aside(dir)); err != nil {
				return nil, err
			}
			if _, err := os.Stat(dir); err == nil {
				p.HadData = append(p.HadData, n)
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
		if err := Write(marker, p); err != nil {
			return nil, err
		}
	}
	for n, dir := range dataDirs {
		switch _, err := os.Stat(Aside(dir)); {
		case err == nil, !slices.Contains(p.HadData, n):
			// The member's data is aside already (or it had none): what is in its place
			// is an earlier attempt's.
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
		case errors.Is(err, os.ErrNotExist):
			if err := os.Rename(dir, Aside(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		default:
			return nil, err
		}
	}
	return p, nil
}

// PutBack gives each member the data Begin set aside for p, or none if it had none.
func PutBack(dataDirs []string, p *Progress) error {
	for n, dir := range dataDirs {
		_, err := os.Stat(Aside(dir))
		switch {
		case err == nil:
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			if err := os.Rename(Aside(dir), dir); err != nil {
				return err
			}
		case !errors.Is(err, os.ErrNotExist):
			return err
		case !slices.Contains(p.HadData, n):
			if err := os.RemoveAll(dir); err != nil { // what an attempt restored
				return err
			}
		} // else: never set aside, the data is still in place
	}
	return nil
}
