package agentproc

import (
	"bufio"
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLikelyOOM makes the host-wide OOM kill count rise (by replacing its
// reader) while a process is SIGKILLed from outside, as the OOM killer
// would: the process is reported as likely OOM, and a kill this package
// sent is not. Not parallel: it replaces a package variable.
func TestLikelyOOM(t *testing.T) {
	var count atomic.Uint64
	count.Store(7)
	saved := hostOOMKillCount
	hostOOMKillCount = func() (uint64, bool) { return count.Load(), true }
	t.Cleanup(func() { hostOOMKillCount = saved })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := New(WithGracePeriod(0))
	defer m.Close()
	start := func() *Process {
		t.Helper()
		// A fresh baseline from the replaced counter, not a cached one.
		lastOOMSample.Store(nil)
		p, err := m.Start(ctx, Request{Command: "echo ready; exec sleep 1000"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitMatch(ctx, regexp.MustCompile(`^ready$`)); err != nil {
			t.Fatal(err)
		}
		return p
	}

	tests := []struct {
		name   string
		rise   bool
		kill   func(p *Process)
		likely bool
		reason ExitReason
	}{
		{"outside SIGKILL, count rose", true, func(p *Process) { _ = unix.Kill(p.Info().PID, unix.SIGKILL) }, true, ReasonSignaled},
		{"outside SIGKILL, count still", false, func(p *Process) { _ = unix.Kill(p.Info().PID, unix.SIGKILL) }, false, ReasonSignaled},
		{"outside SIGTERM, count rose", true, func(p *Process) { _ = unix.Kill(p.Info().PID, unix.SIGTERM) }, false, ReasonSignaled},
		{"Signal(kill), count rose", true, func(p *Process) { _ = p.Signal(SignalKill) }, false, ReasonKilled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start()
			if tt.rise {
				count.Add(1)
			}
			tt.kill(p)
			info, err := p.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.LikelyOOM != tt.likely || info.Reason != tt.reason {
				t.Errorf("got LikelyOOM %v reason %q, want %v %q", info.LikelyOOM, info.Reason, tt.likely, tt.reason)
			}
		})
	}
}

// TestRaiseOOMScoreWalksChildren runs raiseOOMScore (which walks the tree
// with raiseOOMScoreTree) on a tree whose children and grandchildren exist already (forked before
// the call, as a fast shell's may be): all of them get the raised value.
func TestRaiseOOMScoreWalksChildren(t *testing.T) {
	t.Parallel()
	host, err := hostOOMScore()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `sleep 1000 & sh -c 'sleep 1000 & echo $!; wait' & echo $!; wait`)
	// Its own group, killed whole at the end: the outer shell's first
	// sleep prints no PID, and killing only the shell would leave it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Wait()
	})
	// The two PIDs printed are a grandchild and a child: once both lines
	// are read, both forks are complete.
	sc := bufio.NewScanner(out)
	var pids []int
	for len(pids) < 2 && sc.Scan() {
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	m := New(WithOOMScoreDelta(300))
	defer m.Close()
	m.raiseOOMScore(cmd.Process.Pid, &containment{}, m.oomScoreValue())
	want := strconv.Itoa(min(host+300, maxOOMScoreAdj))
	for _, pid := range append(pids, cmd.Process.Pid) {
		got, err := ProcFile(pid, "oom_score_adj")
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("pid %d: got oom_score_adj %q (%v), want %s", pid, got, err, want)
		}
	}
}

// TestAwaitRaiseKeepsPID: the supervisor must not reap the shell before the
// output reader has raised its oom_score_adj, which names it by PID. With
// the raise held back, awaitRaise does not return once the shell has
// exited, and the shell stays a zombie, so its PID is not handed out again;
// once the raise is done it returns and the reap follows.
func TestAwaitRaiseKeepsPID(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &supervisor{cmd: cmd, raised: make(chan struct{})}
	passed := make(chan struct{})
	go func() {
		defer close(passed)
		s.awaitRaise()
	}()
	// The shell has exited once this returns (it does not reap).
	awaitExitUnreaped(cmd.Process.Pid)
	// A broken awaitRaise returns within microseconds of the exit.
	select {
	case <-passed:
		t.Fatal("awaitRaise returned before the raise was done")
	case <-time.After(50 * time.Millisecond):
	}
	if state, ok := procState(cmd.Process.Pid); !ok || state != 'Z' {
		t.Fatalf("shell: state %q (read %v), want a zombie", state, ok)
	}
	close(s.raised)
	select {
	case <-passed:
	case <-time.After(testTimeout):
		t.Fatal("awaitRaise did not return after the raise")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
