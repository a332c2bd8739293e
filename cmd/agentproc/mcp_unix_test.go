//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The MCP server driven by clients nobody here wrote: the Go SDK's own
// client over stdio (CommandTransport), and the TypeScript SDK
// (TestTypeScriptSDKSession in tsclient_unix_test.go) through the same
// session.

// sessionShell is runSession's commands in sh.
var sessionShell = shellCommands{
	server:       func(port int) string { return fmt.Sprintf("%s=%d exec %s", listenEnv, port, os.Args[0]) },
	dial:         func(port int) string { return fmt.Sprintf("%s=%d %s; echo to stderr >&2", dialEnv, port, os.Args[0]) },
	prompt:       `printf 'name? '; read name; echo "hello $name"`,
	answer:       "ada\n",
	ticker:       "for i in 1 2 3 4 5; do echo tick $i; sleep 0.3; done",
	lastTick:     "tick 5",
	leftRunning:  func(pidFile string) string { return "echo $$ > " + pidFile + "; exec sleep 3600" },
	stop:         "terminate",
	stoppedState: "stopped by SIGTERM as asked (exit code 143)",
	portWait:     true,
	sleep:        func(n int) string { return fmt.Sprintf("sleep %d", n) },
}

// alive reports whether pid is a live process: it exists and is not a
// zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// testDir is a directory for one test, removed after it.
func testDir(t *testing.T) string { return t.TempDir() }

// TestMCPDisconnectMidCallStopsEverything leaves while a call is waiting
// and while a process runs: the server stops it and exits.
func TestMCPDisconnectMidCallStopsEverything(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	cmd := agentprocCmd("mcp", "--workdir", dir, "--grace", "2s")
	c := newGoClient(t, ctx, cmd)
	pidFile := filepath.Join(dir, "child.pid")
	// A tree: the shell and a child it waits for, which ignores SIGTERM,
	// so the stop has to escalate.
	res, err := c.call(ctx, "execute", map[string]any{
		"command":           "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > " + pidFile + "; exec sleep 3600' & wait",
		"run_in_background": true,
	}, false)
	if err != nil || res.isError {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	waitFile(t, ctx, pidFile)
	id := field(res.text, "process_id")
	calling := make(chan error, 1)
	go func() {
		_, err := c.call(ctx, "process_wait", map[string]any{"process_id": id, "timeout": 600}, true)
		calling <- err
	}()
	// Leave mid-call: closing the transport closes the server's stdin,
	// as a client that exits does.
	if err := c.close(); err != nil {
		t.Logf("close: %v", err)
	}
	if err := <-calling; err == nil {
		t.Errorf("the call in flight returned no error after the client left")
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Exited() {
		t.Errorf("server state after close: %v, want exited by itself", cmd.ProcessState)
	}
	requireGone(t, ctx, pidFile)
}

// TestMCPIdleUsesNoCPU holds an idle session open and reads the server's
// CPU time from /proc: an idle server must not poll.
func TestMCPIdleUsesNoCPU(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := agentprocCmd("mcp", "--workdir", t.TempDir())
	c := newGoClient(t, ctx, cmd)
	defer c.close()
	if _, err := c.tools(ctx); err != nil {
		t.Fatal(err)
	}
	before := cpuTicks(t, cmd.Process.Pid)
	// A measurement window, not synchronisation: nothing is awaited.
	<-time.After(3 * time.Second)
	after := cpuTicks(t, cmd.Process.Pid)
	// One tick (10 ms) of slack for the runtime's own housekeeping.
	if after-before > 1 {
		t.Errorf("idle for 3 s, the server used %d clock ticks of CPU, want at most 1", after-before)
	}
}

// cpuTicks is utime+stime of pid, in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// TestMCPStateDirAfterKill: a server killed with SIGKILL cannot stop what
// it runs; the next one on the same --state-dir does, before it serves
// (recovered).
func TestMCPStateDirAfterKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	cmd := agentprocCmd("mcp", "--workdir", dir, "--state-dir", state, "--sandbox", "none")
	c := newGoClient(t, ctx, cmd)
	pidFile := filepath.Join(dir, "orphan.pid")
	res, err := c.call(ctx, "execute", map[string]any{"command": "echo $$ > " + pidFile + "; exec sleep 3600", "run_in_background": true}, false)
	if err != nil || res.isError {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	waitFile(t, ctx, pidFile)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.close() // the server is gone; closing only reaps it
	pid := readPID(t, pidFile)
	if !alive(pid) {
		t.Fatalf("process %d ended with the killed server; the test needs it orphaned", pid)
	}

	// Connecting waits for the initialize reply, which comes after the
	// recovery: the orphan is gone by then.
	next := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", dir, "--state-dir", state, "--sandbox", "none"))
	defer next.close()
	if alive(pid) {
		t.Errorf("process %d still runs after the next server started on the state dir", pid)
	}
	requireGone(t, ctx, pidFile)
}

// TestMaxRunning: mcp's --max-running caps the session's running processes
// with a tool error that says what to do, and a process that exits frees
// its place; serve's caps each owner's, with 429 and the reason.
func TestMaxRunning(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	c := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", dir, "--sandbox", "none", "--grace", "1s", "--max-running", "2"))
	defer c.close()
	var ids []string
	for range 2 {
		res, err := c.call(ctx, "execute", map[string]any{"command": "sleep 3600", "run_in_background": true}, false)
		if err != nil || res.isError {
			t.Fatalf("execute under the cap: got %+v, %v", res, err)
		}
		ids = append(ids, field(res.text, "process_id"))
	}
	res, err := c.call(ctx, "execute", map[string]any{"command": "echo over"}, false)
	if err != nil || !res.isError || !strings.Contains(res.text, "too many processes are running") || !strings.Contains(res.text, "process_signal") {
		t.Errorf("execute over the cap: got %+v, %v; want a tool error that says what to do", res, err)
	}
	if _, err := c.call(ctx, "process_signal", map[string]any{"process_id": ids[0], "signal": "kill"}, false); err != nil {
		t.Fatal(err)
	}
	if res, err := c.call(ctx, "process_wait", map[string]any{"process_id": ids[0], "timeout": 20}, false); err != nil || strings.HasPrefix(field(res.text, "state"), "running") {
		t.Fatalf("process_wait after kill: got %+v, %v", res, err)
	}
	if res, err := c.call(ctx, "execute", map[string]any{"command": "echo again"}, false); err != nil || res.isError || output(res.text) != "again\n" {
		t.Errorf("execute after one exited: got %+v, %v; want it run", res, err)
	}

	_, env := serveInDir(t, ctx, dir, "--grace", "1s", "--max-running", "1")
	if _, errOut, code := cli(t, ctx, env, "run", "-d", "--", "sleep 3600"); code != 0 {
		t.Fatalf("serve: the first start: exit %d, %s", code, errOut)
	}
	if _, errOut, code := cli(t, ctx, env, "run", "-d", "--", "sleep 3600"); code != exitError || !strings.Contains(errOut, "the most serve --max-running allows") {
		t.Errorf("serve: a second start of the same owner: got exit %d, stderr %q; want 1 and why", code, errOut)
	}
	if _, errOut, code := cli(t, ctx, env, "run", "--owner", "other", "-d", "--", "sleep 3600"); code != 0 {
		t.Errorf("serve: another owner's start: got exit %d, stderr %q; want it started", code, errOut)
	}

	// Concurrent starts of one owner cannot pass the cap together.
	sock3 := filepath.Join(dir, "agentproc3.sock")
	startServe(t, ctx, "--socket", sock3, "--workdir", dir, "--grace", "1s", "--max-running", "3")
	codes := make(chan int, 8)
	for range 8 {
		go func() {
			cmd := exec.CommandContext(ctx, os.Args[0], "run", "--owner", "burst", "-d", "--", "sleep 3600")
			cmd.Env = append(os.Environ(), runMainEnv+"=1", socketEnv+"="+sock3)
			_ = cmd.Run()
			codes <- cmd.ProcessState.ExitCode()
		}()
	}
	started := 0
	for range 8 {
		if <-codes == 0 {
			started++
		}
	}
	if started != 3 {
		t.Errorf("serve: 8 concurrent starts under --max-running 3: got %d started, want 3", started)
	}
}
