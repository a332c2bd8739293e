package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// endServe ends serve: a process on Windows gets no SIGTERM from another
// one, so it is killed, and its Job Objects, closed with it, end what it
// ran.
func endServe(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// TestServeTCPWindows: the Windows build of serve on TCP (Wine has no
// AF_UNIX sockets, the default), driven by the client commands, each a
// process of its own: a token is needed, run prints a command's output and
// exits with its code, run -d leaves a process that ps lists and stop
// ends, and nothing serve started outlives it.
func TestServeTCPWindows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := testDir(t)
	s := startServe(t, ctx, "--listen", "127.0.0.1:0", "--workdir", dir, "--grace", "2s")
	if len(s.token) != 64 || !strings.HasPrefix(s.addr, "http://127.0.0.1:") {
		t.Fatalf("serve printed token %q and address %q, want a generated token and a loopback URL", s.token, s.addr)
	}
	url := []string{"AGENTPROC_URL=" + s.addr}
	auth := append(url, tokenEnv+"="+s.token)
	if _, errOut, code := cli(t, ctx, url, "run", "--", "echo", "hi"); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("run without a token: exit %d, stderr %q; want refused with 401", code, errOut)
	}
	out, errOut, code := cli(t, ctx, auth, "run", "--", "echo hi& exit 3")
	if code != 3 || strings.TrimRight(out, "\r\n") != "hi" {
		t.Fatalf("run: exit %d, stdout %q, stderr %q; want hi and exit code 3", code, out, errOut)
	}

	pidFile := filepath.Join(dir, "left-running.pid")
	out, _, code = cli(t, ctx, auth, "run", "-d", "--", helperCmd(pidFileEnv, pidFile))
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 36 {
		t.Fatalf("run -d: exit %d, %q", code, out)
	}
	waitFile(t, ctx, pidFile)
	out, _, code = cli(t, ctx, auth, "ps", "-q")
	if short := strings.TrimSpace(out); code != 0 || len(short) < 8 || !strings.HasPrefix(id, short) {
		t.Errorf("ps -q: exit %d, %q; want the start of the helper's ID %s", code, out, id)
	}
	out, _, code = cli(t, ctx, auth, "stop", "--all")
	if code != 0 || strings.TrimSpace(out) != id {
		t.Errorf("stop --all: exit %d, %q; want the helper's ID", code, out)
	}
	requireGone(t, ctx, pidFile)

	// One more left running when serve itself is killed.
	next := filepath.Join(dir, "orphan.pid")
	if _, _, code := cli(t, ctx, auth, "run", "-d", "--", helperCmd(pidFileEnv, next)); code != 0 {
		t.Fatalf("run -d: exit %d", code)
	}
	waitFile(t, ctx, next)
	endServe(s.cmd)
	_ = s.cmd.Wait()
	requireGone(t, ctx, next)
}

// TestServeSocketWindows: serve's default, a Unix socket, where Windows has
// them (10 1803 and later); where it has not (Wine), serve exits at once
// with an error that says to use --listen.
func TestServeSocketWindows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := testDir(t)
	if !underWine() {
		s := startServe(t, ctx, "--workdir", dir, "--socket", filepath.Join(dir, "agentproc.sock"))
		if !strings.HasSuffix(s.addr, "agentproc.sock") {
			t.Errorf("serve listens on %q, want the socket", s.addr)
		}
		return
	}
	_, errOut, code := cli(t, ctx, nil, "serve", "--workdir", dir, "--socket", filepath.Join(dir, "agentproc.sock"))
	if code != 1 || !strings.Contains(errOut, "no Unix sockets") || !strings.Contains(errOut, "--listen") {
		t.Errorf("serve without AF_UNIX: exit %d, stderr %q; want exit 1 and the advice to use --listen", code, errOut)
	}
}
