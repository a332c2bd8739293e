package agentproc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// TestSandboxNoCoreDump: a sandboxed tree, attached and detached, starts
// with RLIMIT_CORE at 1 byte, soft and hard, and cannot raise it, so no core
// dump leaves it: a pipe core_pattern (systemd-coredump, apport) would
// otherwise have a root helper write the tree's memory outside Write, and
// at 0 the kernel still runs the pipe. The host's own limit is unchanged
// (limits belong to the process, and the sandbox forks on a thread of the
// host). Where core_pattern is a plain file name, a real crash with the
// control's dump proves the route: the control leaves a core, the tree
// none. Runs as root and, through TestSandboxUnprivileged, not.
func TestSandboxNoCoreDump(t *testing.T) {
	requireSandbox(t)
	var hostBefore unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &hostBefore); err != nil {
		t.Fatal(err)
	}
	ws, _, _ := sandboxWorkspace(t)
	sb := agentproc.WorkspaceSandbox(ws)
	m := newManager(t, agentproc.WithRedaction(false), agentproc.WithStateDir(t.TempDir()))
	const probe = `grep '^Max core file size' /proc/self/limits; ` +
		`ulimit -H -c unlimited 2>/dev/null && echo RAISED-HARD; ` +
		`prlimit --core=unlimited:unlimited true 2>/dev/null && echo RAISED-PRLIMIT; true`
	for _, detach := range []bool{false, true} {
		p := mustStart(t, m, agentproc.Request{Command: probe, WorkDir: ws, Sandbox: sb, Detach: detach})
		info := mustWait(t, p)
		out := p.Output().Text
		var limit []string
		for line := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(line, "Max core file size") {
				limit = strings.Fields(line)[4:]
			}
		}
		if exitCode(info) != 0 || strings.Join(limit, " ") != "1 1 bytes" {
			t.Errorf("detach %v: got exit %d, core limit %q (%q), want 1 1 bytes", detach, exitCode(info), limit, out)
		}
		if strings.Contains(out, "RAISED") {
			t.Errorf("detach %v: got %q, want the hard core limit not raised", detach, out)
		}
	}
	var hostAfter unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &hostAfter); err != nil {
		t.Fatal(err)
	}
	if hostAfter != hostBefore {
		t.Errorf("host's RLIMIT_CORE: got %+v after the Starts, want %+v as before", hostAfter, hostBefore)
	}

	// A real crash. The pattern is global: it is read, never changed.
	pattern, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	name := strings.TrimSpace(string(pattern))
	if err != nil || name == "" || strings.ContainsAny(name, "|/%") {
		t.Skipf("core_pattern %q is not a plain file name: the crash is not checked", name)
	}
	if hostBefore.Max != unix.RLIM_INFINITY {
		t.Skipf("the host's hard core limit is %d: the control cannot dump", hostBefore.Max)
	}
	const crash = `ulimit -c unlimited 2>/dev/null; sh -c 'kill -SEGV $$'; true`
	cores := func(dir string) []string {
		got, _ := filepath.Glob(filepath.Join(dir, name+"*"))
		return got
	}
	control := t.TempDir()
	c := exec.Command("sh", "-c", crash)
	c.Dir = control
	_ = c.Run()
	if len(cores(control)) == 0 {
		t.Skipf("control: no %s file after a crash without the sandbox (a dump filter or suid_dumpable here)", name)
	}
	runSandboxed(t, m, agentproc.Request{Command: crash, WorkDir: ws, Sandbox: sb})
	if got := cores(ws); len(got) != 0 {
		t.Errorf("sandboxed crash: got core files %q, want none", got)
	}
}

// TestSandboxNoCoreDumpWarnsWithoutTrace: where Yama refuses a child's
// PTRACE_TRACEME (ptrace_scope 2 or 3), the tree starts anyway, without
// the core limit, and its Info.Warnings says core dumps are not stopped
// (a Start that failed there would make the sandbox unusable). Not
// parallel: it replaces what Starts read.
func TestSandboxNoCoreDumpWarnsWithoutTrace(t *testing.T) {
	requireSandbox(t)
	defer agentproc.PretendNoTraceAtExec()()
	ws, _, _ := sandboxWorkspace(t)
	m := newManager(t, agentproc.WithRedaction(false))
	p := mustStart(t, m, agentproc.Request{Command: "grep '^Max core file size' /proc/self/limits", WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws)})
	info := mustWait(t, p)
	if exitCode(info) != 0 {
		t.Fatalf("got exit %d (%q), want 0", exitCode(info), p.Output().Text)
	}
	if w := strings.Join(info.Warnings, "\n"); !strings.Contains(w, "core dumps are not stopped") {
		t.Errorf("got warnings %q, want one saying core dumps are not stopped", info.Warnings)
	}
	if strings.Contains(p.Output().Text, " 1 1 bytes") {
		t.Errorf("got %q: want the limit left as the host's (no trace to set it)", p.Output().Text)
	}
}
