package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// Tests of the eighth attack review (the seventh's fixes):
// docs/sandbox-threats.md, "Eighth attack review (the seventh's fixes)".

// TestAttackServeRefusesUserCoreLimitZero: the seventh review made a hard
// RLIMIT_CORE of 1 or below the mark of a sandboxed tree wherever serve's
// own is above (sandboxCoreMark). A user who turns core dumps off in the
// shell (`ulimit -c 0` in a .bashrc sets the hard limit too; CIS's
// `* hard core 0` in limits.conf does it for every login) has that mark
// without any sandbox, and serve, started where the limit is unlimited (a
// systemd unit: LimitCORE's default hard limit is infinity), refused every
// `agentproc run` of that user as "a sandboxed process". The control: the
// same client without the `ulimit` runs.
func TestAttackServeRefusesUserCoreLimitZero(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &lim); err != nil || lim.Max <= 1 {
		t.Skipf("this process's hard core limit is %d (%v): the mark is off where it is 1 or below", lim.Max, err)
	}
	ctx, outside := sandboxAttack(t)
	dir, ws := t.TempDir(), t.TempDir()
	sock := filepath.Join(dir, "agentproc.sock")
	startServeCmd(t, ctx, agentprocCmd("serve", "--socket", sock, "--workdir", dir, "--grace", "2s"))
	m := agentproc.New()
	defer m.Close()
	client := func(target string) string {
		return runMainEnv + "=1 " + socketEnv + "=" + shellQuote(sock) + " " + shellQuote(os.Args[0]) + " run -- " + shellQuote("echo x > "+shellQuote(target))
	}
	run := func(command string) agentproc.Output {
		t.Helper()
		p, err := m.Start(ctx, agentproc.Request{Command: command, WorkDir: ws})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		return p.Output()
	}
	control := filepath.Join(outside, "control")
	if out := run(client(control)); out.Info.ExitCode == nil || *out.Info.ExitCode != 0 || !written(control) {
		t.Fatalf("control: the user's request: %s %q, want it run and the file written", out.Info.Reason, out.Text)
	}
	target := filepath.Join(outside, "f")
	out := run("ulimit -c 0; grep 'core file' /proc/self/limits; " + client(target))
	if strings.Contains(out.Text, "sandboxed process") || !written(target) {
		t.Errorf("after ulimit -c 0, unsandboxed: got %s %q, want the request run (no sandbox made this limit)", out.Info.Reason, out.Text)
	}
}
