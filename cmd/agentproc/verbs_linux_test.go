package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitInterrupted: wait ended by Ctrl-C or SIGTERM says which signal
// ended it and that the process still runs (exit 1), not "still running
// after 0s" as if its --timeout had passed; the process is left running.
func TestWaitInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, env := serveInDir(t, ctx, dir, "--grace", "2s")
	out, errOut, code := cli(t, ctx, env, "run", "-d", "--", "sleep 3600")
	if code != 0 {
		t.Fatalf("run -d: exit %d, %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	for _, tt := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGINT, "agentproc wait: interrupt signal received"},
		{syscall.SIGTERM, "agentproc wait: terminated signal received"},
	} {
		cmd := clientCmd(ctx, env, "wait", id)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The signal handler is in place before the client dials the
		// serve: a socket among its descriptors says it is waiting, or
		// (rarely) still resolving the ID, which ends with the signal's
		// name alone.
		waitSocket(t, ctx, cmd.Process.Pid)
		if err := cmd.Process.Signal(tt.sig); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		got := stderr.String()
		if code := cmd.ProcessState.ExitCode(); code != exitError || got != tt.want+"\n" && got != tt.want+"; "+id[:8]+" is still running\n" {
			t.Errorf("wait after %v: got exit %d, stderr %q; want exit 1 and %q, then that %s still runs", tt.sig, code, got, tt.want, id[:8])
		}
	}
	if out, _, _ := cli(t, ctx, env, "ps", "-q", "--no-trunc"); out != id+"\n" {
		t.Errorf("ps after the interrupted waits: got %q, want the process still running", out)
	}
}

// waitSocket waits until process pid holds a socket.
func waitSocket(t *testing.T, ctx context.Context, pid int) {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	for ctx.Err() == nil {
		entries, _ := os.ReadDir(fds)
		for _, e := range entries {
			if l, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("process %d never opened a socket", pid)
}
