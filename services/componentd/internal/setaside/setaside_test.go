package setaside

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// dataDirs returns n members' data directories under dir; those in withData get a file
// "data" saying whose original data it is.
func dataDirs(t testing.TB, dir string, n int, withData ...int) []string {
	t.Helper()
	var dirs []string
	for i := range n {
		dirs = append(dirs, filepath.Join(dir, fmt.Sprintf("etcd-%d", i)))
	}
	for _, i := range withData {
		writeData(t, dirs[i], fmt.Sprintf("original etcd-%d", i))
	}
	return dirs
}

func writeData(t testing.TB, dataDir, content string) {
	t.Helper()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "data"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// data is each member's data file content, "" for no data directory at all.
func data(t testing.TB, dirs []string) []string {
	t.Helper()
	out := make([]string, len(dirs))
	for i, d := range dirs {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "data"))
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		out[i] = string(b)
	}
	return out
}

func expectData(t testing.TB, dirs []string, want ...string) {
	t.Helper()
	if got := data(t, dirs); !slices.Equal(got, want) {
		t.Fatalf("data = %q, want %q", got, want)
	}
}

// A restore that fails, is retried after a restart and is then cancelled leaves every
// member's data exactly as it was before the first attempt: a member that had data gets it
// back, one that had none (lost) has none again; an earlier restore's asides are dropped.
func TestBegin_RetriedAndCancelled_LeavesTheDataAsItWas(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	dirs := dataDirs(t, dir, 3, 0, 2) // etcd-1 lost its data
	writeData(t, Aside(dirs[0]), "from an earlier restore")

	p, err := Begin(marker, dirs, "b1@t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	expectData(t, dirs, "", "", "")
	// The attempt restored two members, then failed.
	writeData(t, dirs[0], "half-restored")
	writeData(t, dirs[1], "half-restored")

	again, err := Read(marker) // a retry after a restart
	if err != nil || again == nil || again.Request != "b1@t1" || !slices.Equal(again.HadData, []int{0, 2}) {
		t.Fatalf("marker = %+v, %v", again, err)
	}
	if _, err := Begin(marker, dirs, "b1@t1", again); err != nil {
		t.Fatal(err)
	}
	expectData(t, dirs, "", "", "")
	writeData(t, dirs[2], "restored")

	if err := PutBack(dirs, p); err != nil {
		t.Fatal(err)
	}
	expectData(t, dirs, "original etcd-0", "", "original etcd-2")
}

// A crash after the marker was written but before the data was moved: a cancel finds the
// data in place, a retry moves it.
func TestBegin_CrashBeforeAMemberWasSetAside_KeepsItsData(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	dirs := dataDirs(t, dir, 2, 0, 1)
	p := &Progress{Request: "b1@t1", HadData: []int{0, 1}}
	if err := Write(marker, p); err != nil {
		t.Fatal(err)
	}
	if err := PutBack(dirs, p); err != nil {
		t.Fatal(err)
	}
	expectData(t, dirs, "original etcd-0", "original etcd-1")
	if _, err := Begin(marker, dirs, "b1@t1", p); err != nil {
		t.Fatal(err)
	}
	expectData(t, dirs, "", "")
	if err := PutBack(dirs, p); err != nil {
		t.Fatal(err)
	}
	expectData(t, dirs, "original etcd-0", "original etcd-1")
}

// FuzzRestoreRequests: any sequence of restore requests, attempts that restore some members
// and fail, restarts, crashes between the steps of Begin, cancels and completions. A cancel
// always leaves the data exactly as it was when its request's first attempt began; a
// completed restore leaves every member restored.
func FuzzRestoreRequests(f *testing.F) {
	f.Add(byte(0b101), []byte{0, 1, 0, 1, 2})
	f.Add(byte(0b011), []byte{0, 3, 0, 4, 0, 2})
	f.Add(byte(0), []byte{0, 5, 0, 1, 0, 2, 0, 2})
	f.Add(byte(0b111), []byte{6, 0, 9, 13, 0, 2})
	f.Fuzz(func(t *testing.T, initial byte, ops []byte) {
		if len(ops) > 32 {
			ops = ops[:32]
		}
		dir := t.TempDir()
		marker := filepath.Join(dir, "marker")
		var had []int
		for i := range 3 {
			if initial&(1<<i) != 0 {
				had = append(had, i)
			}
		}
		dirs := dataDirs(t, dir, 3, had...)
		var (
			req    int      // the pending request's number, 0: none
			before []string // the data when its first attempt began
			next   = 1
		)
		id := func() string { return fmt.Sprintf("r%d", req) }
		for _, op := range ops {
			switch k := int(op >> 3); op % 8 {
			case 0: // an attempt of the pending request (or a new request) begins
				if req == 0 {
					req, next = next, next+1
				}
				p, err := Read(marker)
				if err != nil {
					t.Fatal(err)
				}
				if p != nil && p.Request != id() {
					t.Fatalf("marker of %s while %s is pending", p.Request, id())
				}
				if p == nil {
					before = data(t, dirs)
				}
				if _, err := Begin(marker, dirs, id(), p); err != nil {
					t.Fatal(err)
				}
			case 1, 3, 4: // the attempt restored member k (then failed, or carries on)
				if _, err := os.Stat(marker); err == nil {
					writeData(t, dirs[k%3], "restored")
				}
			case 2: // cancelled: the data goes back
				p, err := Read(marker)
				if err != nil {
					t.Fatal(err)
				}
				if p != nil {
					if err := PutBack(dirs, p); err != nil {
						t.Fatal(err)
					}
					if err := os.Remove(marker); err != nil {
						t.Fatal(err)
					}
					if got := data(t, dirs); !slices.Equal(got, before) {
						t.Fatalf("after cancelling %s: data %q, want %q as before", id(), got, before)
					}
				}
				req = 0
			case 5: // a crash inside Begin, after the marker, before member k moved
				if req != 0 {
					if p, _ := Read(marker); p == nil {
						before = data(t, dirs)
						p = &Progress{Request: id(), HadData: []int{}}
						for n, d := range dirs {
							_ = os.RemoveAll(Aside(d))
							if _, err := os.Stat(d); err == nil {
								p.HadData = append(p.HadData, n)
							}
						}
						if err := Write(marker, p); err != nil {
							t.Fatal(err)
						}
						for n, d := range dirs[:k%3] {
							if slices.Contains(p.HadData, n) {
								_ = os.Rename(d, Aside(d))
							}
						}
					}
				}
			case 6: // the request completes: every member restored, the marker removed
				if p, _ := Read(marker); p != nil {
					for _, d := range dirs {
						_ = os.RemoveAll(d)
						writeData(t, d, "restored")
					}
					if err := os.Remove(marker); err != nil {
						t.Fatal(err)
					}
					expectData(t, dirs, "restored", "restored", "restored")
				}
				req = 0
			}
		}
	})
}
