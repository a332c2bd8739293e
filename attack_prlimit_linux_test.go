package agentproc_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestAttackLimitsOfAnotherProcess: prlimit(2) on another process needs
// only the same user (no capability), and Landlock has no hook on it, so a
// tree lowered the limits of the host and of any other process of its
// user: RLIMIT_CPU below the time already used makes the kernel SIGKILL
// the host at once (Landlock's signal scope sees no sender), RLIMIT_NOFILE
// or RLIMIT_AS at zero break it. The victim here is an unconfined sleep of
// the test's user; the control changes its limit without the sandbox.
// Runs as root and, through TestSandboxUnprivileged, not.
func TestAttackLimitsOfAnotherProcess(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit is not installed")
	}
	ws, _, _ := sandboxWorkspace(t)
	victim := func() string {
		v := exec.Command("sleep", "600")
		if err := v.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = v.Process.Kill()
			_ = v.Wait()
		})
		return strconv.Itoa(v.Process.Pid)
	}
	maxOpen := func(pid string) string {
		b, err := os.ReadFile("/proc/" + pid + "/limits")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(line, "Max open files") {
				return strings.Join(strings.Fields(line)[3:5], " ")
			}
		}
		t.Fatalf("no open-files line in %s", b)
		return ""
	}
	m := newManager(t, agentproc.WithRedaction(false))
	attempt := func(pid string) string { return "prlimit --pid " + pid + " --nofile=7:7" }
	control := victim()
	if out := runSandboxed(t, m, agentproc.Request{Command: attempt(control), WorkDir: ws}); exitCode(out.Info) != 0 || maxOpen(control) != "7 7" {
		t.Fatalf("control: got exit %d %q, limit %q, want the limit set to 7 without the sandbox", exitCode(out.Info), out.Text, maxOpen(control))
	}
	target := victim()
	before := maxOpen(target)
	sb := agentproc.WorkspaceSandbox(ws)
	// Not the host itself ($PPID): on failure the test would lose its
	// own descriptors (it did, the first time).
	out := runSandboxed(t, m, agentproc.Request{Command: attempt(target), WorkDir: ws, Sandbox: sb})
	if got := maxOpen(target); got != before {
		t.Errorf("sandboxed prlimit on an unconfined process: its open-files limit went from %q to %q (%q), want it unchanged", before, got, out.Text)
	}
	// The tree still sets its own limits (ulimit, prlimit without --pid).
	out = runSandboxed(t, m, agentproc.Request{Command: "ulimit -n 9 && prlimit --nofile=8:8 sh -c 'ulimit -n'", WorkDir: ws, Sandbox: sb})
	if exitCode(out.Info) != 0 || strings.TrimSpace(out.Text) != "8" {
		t.Errorf("own limits: got exit %d %q, want 8", exitCode(out.Info), out.Text)
	}
}
