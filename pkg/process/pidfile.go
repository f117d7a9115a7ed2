package process

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/atomicfile"
)

// pidRecord is what a pidfile holds. StartTicks is the process's start time in clock ticks
// since boot (field 22 of /proc/<pid>/stat): a pid that names a process with another start
// time has been recycled and is not ours.
type pidRecord struct {
	Pid        int       `json:"pid"`
	StartTicks uint64    `json:"start_ticks"`
	Hash       string    `json:"hash"`
	StartedAt  time.Time `json:"started_at"`
}

func readPidfile(path string) (pidRecord, error) {
	var r pidRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("pidfile %s: %w", path, err)
	}
	if r.Pid <= 0 || r.StartTicks == 0 {
		return r, fmt.Errorf("pidfile %s: no pid or start time", path)
	}
	return r, nil
}

// writePidfile replaces path atomically, so a reader never sees half a record.
func writePidfile(path string, r pidRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("pidfile: %w", err)
	}
	return nil
}

func removePidfile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove pidfile: %w", err)
	}
	return nil
}

// procStat is what we need from /proc/<pid>/stat.
type procStat struct {
	state      byte   // field 3: R, S, D, Z, X, ...
	pgrp       int    // field 5: process group id
	startTicks uint64 // field 22: start time in clock ticks since boot
}

// dead reports a process that has exited but whose parent has not yet reaped it.
func (s procStat) dead() bool { return s.state == 'Z' || s.state == 'X' }

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// parseProcStat parses a /proc/<pid>/stat line. Field 2, the command name in parentheses,
// may itself contain spaces and parentheses, so fields are counted from the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed /proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	const startTimeField = 22 - 3 // f[0] is field 3
	if len(f) <= startTimeField || len(f[0]) != 1 {
		return procStat{}, errors.New("malformed /proc stat: too few fields")
	}
	const pgrpField = 5 - 3
	pgrp, err := strconv.Atoi(f[pgrpField])
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat: process group: %w", err)
	}
	ticks, err := strconv.ParseUint(f[startTimeField], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat: start time: %w", err)
	}
	return procStat{state: f[0][0], pgrp: pgrp, startTicks: ticks}, nil
}

// liveGroupMember reports whether some process in group pgid has not exited. It scans /proc,
// so it is only used once kill(-pgid, 0) says the group exists: zombies, which only their
// parent can remove, count as group members for kill but not here.
func liveGroupMember(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.pgrp == pgid && !st.dead() {
			return true
		}
	}
	return false
}
