package agentproc_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestSandboxDetached: a detached process runs under the same confinement
// as an attached one: it writes its workspace and TMPDIR but nothing
// outside, cannot read a hidden credential, sees no secret variable, its
// TMPDIR is removed once it exits, and Stop works, also after a restart.
func TestSandboxDetached(t *testing.T) {
	requireSandbox(t)
	ws, key, secret := sandboxWorkspace(t)
	outside := t.TempDir()
	state := t.TempDir()
	sb := agentproc.WorkspaceSandbox(ws)

	m1 := agentproc.New(agentproc.WithStateDir(state), agentproc.WithSandbox(sb))
	t.Cleanup(func() { _ = m1.Close() })
	script := `echo in > inside && echo "tmp=$TMPDIR" && echo t > "$TMPDIR/t" && echo tmp-written; ` +
		`echo x > ` + filepath.Join(outside, "escape") + ` 2>/dev/null && echo WROTE-OUTSIDE; ` +
		`cat ` + key + ` 2>/dev/null && echo READ-KEY; ` +
		`env | grep -q ` + secret + ` && echo SAW-SECRET; true`
	p := mustStart(t, m1, agentproc.Request{Command: script, WorkDir: ws, Detach: true})
	info := p.Info()
	if !info.Detached || info.Sandbox == nil || info.Sandbox.TempDir == "" || len(info.Sandbox.Mechanisms) == 0 {
		t.Fatalf("Info: got Detached %v Sandbox %+v, want a detached, confined process with a temp dir", info.Detached, info.Sandbox)
	}
	t.Logf("detached confinement: %+v", *info.Sandbox)
	tmp := info.Sandbox.TempDir
	info = mustWait(t, p)
	out := p.Output().Text
	if exitCode(info) != 0 || !strings.Contains(out, "tmp="+tmp+"\n") || !strings.Contains(out, "tmp-written") {
		t.Errorf("detached sandboxed run: got code %d output %q, want 0 with TMPDIR %s written", exitCode(info), out, tmp)
	}
	for _, leak := range []string{"WROTE-OUTSIDE", "READ-KEY", "PRIVATE-KEY", "SAW-SECRET"} {
		if strings.Contains(out, leak) {
			t.Errorf("detached sandboxed run escaped (%s): output %q", leak, out)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file outside the workspace: got %v, want it never written", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside")); err != nil || string(b) != "in\n" {
		t.Errorf("workspace file: got %q, %v, want %q", b, err, "in\n")
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("TMPDIR %s after exit: got %v, want removed", tmp, err)
	}

	if isRoot() {
		// A server on the private loopback, seen by WaitPort.
		lsb := agentproc.WorkspaceSandbox(ws)
		lsb.Network = agentproc.NetworkLoopback
		port := freePort(t)
		req := probeRequest(t, ws, "serve", "127.0.0.1:"+strconv.Itoa(port))
		req.Detach, req.Sandbox = true, lsb
		srv := mustStart(t, m1, req)
		if _, err := srv.WaitPort(testContext(t), port); err != nil {
			t.Errorf("WaitPort of a detached server on the private loopback: %v", err)
		}
		if _, err := srv.Stop(testContext(t)); err != nil {
			t.Errorf("Stop the server: %v", err)
		}
	}

	// Stop, on the Manager that started it and on one that adopted it.
	stopped := mustStart(t, m1, agentproc.Request{Command: "echo up; exec sleep 300", WorkDir: ws, Detach: true})
	adopted := mustStart(t, m1, agentproc.Request{Command: "echo up; exec sleep 300", WorkDir: ws, Detach: true})
	for _, q := range []*agentproc.Process{stopped, adopted} {
		if _, err := q.WaitMatch(testContext(t), regexp.MustCompile("up")); err != nil {
			t.Fatalf("WaitMatch: %v", err)
		}
	}
	if info, err := stopped.Stop(testContext(t)); err != nil || info.Running {
		t.Errorf("Stop: got %+v, %v, want stopped", info, err)
	}
	if _, err := os.Stat(stopped.Info().Sandbox.TempDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("TMPDIR after Stop: got %v, want removed", err)
	}
	want := adopted.Info().Sandbox
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(want.TempDir); err != nil {
		t.Fatalf("TMPDIR of a running detached process after Close: %v, want kept", err)
	}
	m2 := newManager(t, agentproc.WithStateDir(state))
	if _, err := m2.Recovered(testContext(t)); err != nil {
		t.Fatal(err)
	}
	q, err := m2.Get(adopted.ID())
	if err != nil {
		t.Fatal(err)
	}
	got := q.Info().Sandbox
	if got == nil || got.TempDir != want.TempDir || strings.Join(got.Mechanisms, ",") != strings.Join(want.Mechanisms, ",") {
		t.Errorf("adopted Info.Sandbox: got %+v, want %+v", got, want)
	}
	if info, err := q.Stop(testContext(t)); err != nil || info.Running {
		t.Errorf("Stop after restart: got %+v, %v, want stopped", info, err)
	}
	if _, err := os.Stat(want.TempDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("TMPDIR after Stop of an adopted process: got %v, want removed", err)
	}
}
