package pidfd_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/pidfd"
	"github.com/agentproc/agentproc/internal/testleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(leakChecked{m}) }

// leakChecked fails the run if a process the tests started outlives them
// (internal/testleak), killing it.
type leakChecked struct{ m *testing.M }

func (l leakChecked) Run() int {
	run := testleak.Mark()
	code := l.m.Run()
	if leaks := testleak.Check(run, 5*time.Second); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, testleak.Report(leaks))
		testleak.Kill(run, leaks)
		code = 1
	}
	return code
}

// sleeper starts a child that runs until it is killed; the test's cleanup
// kills and reaps it whatever happened.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// needPidfd skips where this kernel or its seccomp profile has no
// pidfd_open; the root package's TestEscapesWithoutPidfd covers that path.
func needPidfd(t *testing.T) {
	t.Helper()
	fd := pidfd.Open(os.Getpid())
	if fd < 0 {
		t.Skip("no pidfd_open here")
	}
	pidfd.Close(fd)
}

// killedBy waits (bounded) for cmd to end and checks that sig ended it.
func killedBy(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("got exit %v, want killed by %v", err, sig)
		}
		if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != sig {
			t.Fatalf("got %v, want killed by %v", ee, sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("child still running 10 s after %v", sig)
	}
}

// TestSignalChecksAfterPinning: a process that fails its check is not
// signalled, one that passes is, through its pin, and Wait sees it exit.
func TestSignalChecksAfterPinning(t *testing.T) {
	t.Parallel()
	needPidfd(t)
	cmd := sleeper(t)
	pid := cmd.Process.Pid
	var ts pidfd.Targets
	defer ts.Close()

	checked := 0
	if got := ts.Signal(pid, unix.SIGKILL, func() bool { checked++; return false }); got != pidfd.Skipped {
		t.Fatalf("Signal with a failing check: got %v, want Skipped", got)
	}
	if checked != 1 {
		t.Fatalf("check called %d times, want 1", checked)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("child after a refused Signal: got %v, want alive", err)
	}
	if fds, bare := ts.Killed(false); len(fds)+len(bare) != 0 {
		t.Fatalf("Killed after a refused Signal: got %v, %v, want nothing", fds, bare)
	}

	if got := ts.Signal(pid, unix.SIGKILL, func() bool { return true }); got != pidfd.Sent {
		t.Fatalf("Signal with a passing check: got %v, want Sent", got)
	}
	fds, bare := ts.Killed(true)
	if len(fds) != 1 || len(bare) != 0 {
		t.Fatalf("Killed: got %d pidfds and bare %v, want 1 pidfd", len(fds), bare)
	}
	if !pidfd.Wait(fds, time.Now().Add(10*time.Second)) {
		t.Fatal("Wait: got false, want the killed child seen exiting within 10 s")
	}
	// Exited but not reaped: the PID is still the child's, yet the target
	// is forgotten, so a new process under the PID would be checked anew.
	if _, done := ts.Known(pid, unix.SIGKILL); done {
		t.Fatal("Known for a target that exited: got done, want it forgotten")
	}
	killedBy(t, cmd, unix.SIGKILL)
}

// TestKnownUsesThePin: a pinned target is not checked again; its first
// SIGKILL goes through the pidfd, and only once.
func TestKnownUsesThePin(t *testing.T) {
	t.Parallel()
	needPidfd(t)
	cmd := sleeper(t)
	pid := cmd.Process.Pid
	var ts pidfd.Targets
	defer ts.Close()

	if got := ts.Signal(pid, unix.SIGCONT, func() bool { return true }); got != pidfd.Sent {
		t.Fatalf("Signal(SIGCONT): got %v, want Sent", got)
	}
	if got := ts.Signal(pid, unix.SIGCONT, func() bool { t.Error("checked a pinned target again"); return false }); got != pidfd.Pinned {
		t.Fatalf("Signal(SIGCONT) again: got %v, want Pinned", got)
	}
	if got, done := ts.Known(pid, unix.SIGKILL); !done || got != pidfd.PinnedKilled {
		t.Fatalf("Known(SIGKILL): got %v, %v, want PinnedKilled, true", got, done)
	}
	killedBy(t, cmd, unix.SIGKILL)
}

// TestWaitDeadline: Wait returns false at its deadline for a live process.
func TestWaitDeadline(t *testing.T) {
	t.Parallel()
	needPidfd(t)
	cmd := sleeper(t)
	fd := pidfd.Open(cmd.Process.Pid)
	defer pidfd.Close(fd)
	if pidfd.Exited(fd) {
		t.Fatal("Exited for a live child: got true, want false")
	}
	if pidfd.Wait([]int{fd}, time.Now().Add(20*time.Millisecond)) {
		t.Fatal("Wait for a live child: got true, want false at the deadline")
	}
}
