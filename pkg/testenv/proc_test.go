package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/testenv"
)

func TestProcessesUnder_FindsARunningProcessThatNamesTheDirAndNotOnceItIsGone(t *testing.T) {
	dir := t.TempDir()
	// sleep started through a link in dir names dir in its cmdline and has no child: a shell
	// would fork one, which reads the shell's cmdline until it execs (and outlives the kill).
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sleep")
	if err := os.Symlink(sleep, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Start returns once execve is past its point of no return, a moment before the kernel
	// lays out the new argv: /proc/<pid>/cmdline may read empty for that moment.
	testenv.Eventually(t, 5*time.Second, func() bool { return slices.Contains(testenv.ProcessesUnder(dir), pid) && testenv.Alive(pid) },
		"ProcessesUnder(%s) never listed the running pid %d", dir, pid)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if got := testenv.ProcessesUnder(dir); len(got) != 0 || testenv.Alive(pid) {
		t.Fatalf("after the kill: ProcessesUnder = %v, Alive = %v; want none", got, testenv.Alive(pid))
	}
}

func TestProcKiB_ReadsAFieldOfStatusAndSaysWhichIsMissing(t *testing.T) {
	rss, err := testenv.ProcKiB("self", "status", "VmRSS")
	if err != nil || rss <= 0 {
		t.Fatalf("VmRSS of self = %d, %v; want > 0", rss, err)
	}
	anon, err := testenv.ProcKiB("self", "status", "RssAnon")
	if err != nil || anon <= 0 || anon > rss {
		t.Fatalf("RssAnon of self = %d, %v; want in (0, VmRSS %d]", anon, err, rss)
	}
	if _, err := testenv.ProcKiB("self", "status", "NoSuchField"); err == nil {
		t.Error("a missing field: no error")
	}
}
