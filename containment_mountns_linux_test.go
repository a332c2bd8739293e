package agentproc_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// TestSandboxNamespaceSweepsEnvIEscapee: a tree sandboxed as root, without
// a cgroup, leaves two processes that carry no marker and left its
// session: `env -i setsid sleep` (exec'd with an empty environment) and a
// perl that rewrote its title (which on Linux overwrites the environment
// the marker is read from). Both outlived Stop, the shell's exit and Close
// (docs/containment.md's "not caught" row). The tree runs in a mount
// namespace of its own, which it can neither leave nor share (new
// namespaces are refused: TestSandboxRefusesNewNamespaces), and the sweep
// now also kills every process in it. Each stop path must leave neither.
func TestSandboxNamespaceSweepsEnvIEscapee(t *testing.T) {
	requireRootSandbox(t)
	const escapees = `env -i PATH="$PATH" setsid sleep 1000 > /dev/null 2>&1 & echo pid=$!
setsid perl -e '$0 = "worker"; $| = 1; print "titled pid=$$\n"; sleep 1000' &
`
	stop := func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process) agentproc.Info {
		info, err := p.Stop(testContext(t))
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
		return info
	}
	// After more forks than the sweep probes one by one (rangeProbeMax),
	// the sweep reads all of /proc: the other way to look.
	const forks = `i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done; `
	for _, path := range []struct {
		name, before string
		stop         func(t *testing.T, m *agentproc.Manager, p *agentproc.Process) agentproc.Info
	}{
		{"stop", "", stop},
		{"stop after 300 forks", forks, stop},
		{"shell exits", "", func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process) agentproc.Info {
			if err := unix.Kill(p.Info().PID, unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return mustWait(t, p)
		}},
		{"close", "", func(t *testing.T, m *agentproc.Manager, p *agentproc.Process) agentproc.Info {
			if err := m.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return p.Info()
		}},
	} {
		t.Run(path.name, func(t *testing.T) {
			ws := t.TempDir()
			m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)), agentproc.WithPipeDrain(escapeDrain))
			p := mustStart(t, m, agentproc.Request{WorkDir: ws, Command: escapees + path.before + "echo ready; exec sleep 1000"})
			waitForOutput(t, p, regexp.MustCompile(`titled pid=\d+`))
			waitForOutput(t, p, regexp.MustCompile(`ready`))
			pids := pidsIn(t, p.Output().Text)
			if len(pids) != 2 {
				t.Fatalf("escapees: got %v, want 2", pids)
			}
			killAtCleanup(t, pids)
			waitComm(t, pids[:1], "sleep")
			marker := []byte(agentproc.MarkerEnv + "=" + p.ID())
			for _, pid := range pids {
				if env, err := agentproc.ProcFile(pid, "environ"); err != nil || bytes.Contains(env, marker) {
					t.Fatalf("escapee %d: environment %q (%v), want it read without the marker", pid, env, err)
				}
			}
			info := path.stop(t, m, p)
			requireGone(t, pids)
			if info.Leftovers < len(pids) {
				t.Errorf("Leftovers got %d, want at least %d", info.Leftovers, len(pids))
			}
		})
	}
}

// killAtCleanup kills pids, if still running, when the test ends: through
// pidfds opened now, while the PIDs are known to be the test's processes.
func killAtCleanup(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd of %d: %v", pid, err)
		}
		t.Cleanup(func() {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			_ = unix.Close(fd)
		})
	}
}

// TestSandboxRefusesNewNamespaces: a tree sandboxed as root may make no
// namespace (unshare and clone with a CLONE_NEW* flag answer EPERM), so
// that it cannot leave its own mount namespace, which the sweep finds its
// processes by: `unshare -U` then `unshare -m` left it without any
// capability of the host. A plain fork still works. The control: the
// same commands work in an unsandboxed tree.
func TestSandboxRefusesNewNamespaces(t *testing.T) {
	requireRootSandbox(t)
	const cmd = `for a in -U -m -Ur -i -n -p -u -C -T "--propagation unchanged -Umi"; do unshare $a true 2>/dev/null; echo "$a=$?"; done; (echo forked)`
	flags := []string{"-U", "-m", "-Ur", "-i", "-n", "-p", "-u", "-C", "-T", "--propagation unchanged -Umi"}
	ws := t.TempDir()
	plain := newManager(t)
	ctrl := runSandboxed(t, plain, agentproc.Request{WorkDir: ws, Command: cmd})
	for _, f := range flags {
		if !strings.Contains(ctrl.Text, f+"=0\n") && f != "-T" {
			t.Fatalf("control: unshare %s in an unsandboxed tree: output %q, want it to work", f, ctrl.Text)
		}
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Command: cmd})
	for _, f := range flags {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(f) + `=[1-9]`).MatchString(out.Text) {
			t.Errorf("unshare %s in a tree sandboxed as root: output %q, want it refused", f, out.Text)
		}
	}
	if !strings.Contains(out.Text, "forked") {
		t.Errorf("a fork in the sandboxed tree: output %q, want it to work", out.Text)
	}
}
