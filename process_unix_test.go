//go:build unix

package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

func TestExitCode42(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "exit 42"})
	info := mustWait(t, p)
	if got := exitCode(info); got != 42 {
		t.Errorf("exit code got %d, want 42", got)
	}
	if info.Reason != agentproc.ReasonExited || info.ExitSignal != "" {
		t.Errorf("reason/signal got %q/%q, want exited/\"\"", info.Reason, info.ExitSignal)
	}
}

func TestOutputOfRunningProcess(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo started; exec sleep 1000"})
	waitForOutput(t, p, regexp.MustCompile(`started\n`))
	out := p.Output()
	if !out.Running || out.ExitCode != nil || out.Reason != "" {
		t.Errorf("running Output state got %+v, want running without exit code", out.Info)
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

func TestWaitTimeoutReturnsRunning(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "sleep 1000"})
	// The process runs until stopped, so only the ctx can end this wait,
	// however late its 20 ms deadline is noticed.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	info, err := p.Wait(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !info.Running || info.ExitCode != nil {
		t.Errorf("Wait: got (%+v, %v), want running and DeadlineExceeded", info, err)
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentWaitersAllWake(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	q := mustStart(t, m, agentproc.Request{Command: "sleep 1000"})
	var wg sync.WaitGroup
	results := make(chan agentproc.Info, 50)
	for range 50 {
		wg.Go(func() {
			info, err := q.Wait(testContext(t))
			if err != nil {
				t.Errorf("Wait: %v", err)
			}
			results <- info
		})
	}
	// SIGKILL cannot be caught, so it needs no readiness event; a waiter
	// that starts after the exit returns at once, so neither does Wait.
	if err := q.Signal(agentproc.SignalKill); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	for info := range results {
		if info.Running || info.ExitSignal != "SIGKILL" {
			t.Errorf("waiter woke with %+v, want killed", info)
		}
	}
}

func TestSignals(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	for _, tt := range []struct {
		sig      agentproc.Signal
		wantCode int
		wantName string
	}{
		{agentproc.SignalKill, 128 + 9, "SIGKILL"},
		{agentproc.SignalTerminate, 128 + 15, "SIGTERM"},
		{agentproc.SignalInterrupt, 128 + 2, "SIGINT"},
	} {
		// The helper is exec'd and says when it is ready: a shell that is
		// still starting would defer SIGINT until its child exits.
		p := mustStart(t, m, helperRequest(t, "ready"))
		waitForOutput(t, p, regexp.MustCompile(`ready`))
		if err := p.Signal(tt.sig); err != nil {
			t.Fatalf("Signal(%s): %v", tt.sig, err)
		}
		info := mustWait(t, p)
		if exitCode(info) != tt.wantCode || info.ExitSignal != tt.wantName || info.Reason != agentproc.ReasonKilled {
			t.Errorf("%s: got code %d signal %q reason %q, want %d %q %q",
				tt.sig, exitCode(info), info.ExitSignal, info.Reason, tt.wantCode, tt.wantName, agentproc.ReasonKilled)
		}
		if err := p.Signal(tt.sig); !errors.Is(err, agentproc.ErrNotRunning) {
			t.Errorf("Signal after exit: got %v, want ErrNotRunning", err)
		}
	}
	p := mustStart(t, m, agentproc.Request{Command: "true"})
	if err := p.Signal("hup"); !errors.Is(err, agentproc.ErrUnsupportedSignal) {
		t.Errorf("Signal(hup): got %v, want ErrUnsupportedSignal", err)
	}
	mustWait(t, p)
}

func TestSignaledFromOutside(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "exec sleep 1000"})
	// No readiness event is needed: Start returns after the exec of sh,
	// and SIGTERM's default action ends sh and sleep alike, so the outcome
	// is the same whenever it lands.
	if err := unix.Kill(p.Info().PID, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonSignaled || info.ExitSignal != "SIGTERM" || exitCode(info) != 143 {
		t.Errorf("got reason %q signal %q code %d, want signaled SIGTERM 143", info.Reason, info.ExitSignal, exitCode(info))
	}
}

func TestSignalRacingExit(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	for range 20 {
		p := mustStart(t, m, agentproc.Request{Command: "true"})
		for p.Info().Running {
			err := p.Signal(agentproc.SignalTerminate)
			if err != nil && !errors.Is(err, agentproc.ErrNotRunning) {
				t.Fatalf("Signal racing exit: got %v, want nil or ErrNotRunning", err)
			}
			if err != nil {
				break
			}
		}
		mustWait(t, p)
	}
}

func TestStopEscalatesAfterGrace(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithGracePeriod(3*time.Second))
	trap := clk.Trap().NewTimer("agentproc", "grace")
	defer trap.Close()
	p := mustStart(t, m, agentproc.Request{Command: `trap '' TERM; echo ready; while :; do sleep 1; done`})
	waitForOutput(t, p, regexp.MustCompile(`ready`))

	ctx := testContext(t)
	type result struct {
		info agentproc.Info
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, err := p.Stop(ctx)
		done <- result{info, err}
	}()
	call := trap.MustWait(ctx)
	call.MustRelease(ctx)
	// The shell ignores SIGTERM, and so do its `sleep 1` children, which
	// inherit the ignored disposition: nothing ends the loop until the
	// grace period passes.
	select {
	case r := <-done:
		t.Fatalf("Stop returned before the grace period: %+v", r)
	default:
	}
	clk.Advance(3 * time.Second).MustWait(ctx)
	select {
	case r := <-done:
		if r.err != nil || r.info.ExitSignal != "SIGKILL" || r.info.Reason != agentproc.ReasonKilled {
			t.Errorf("Stop: got (%+v, %v), want SIGKILL and reason killed", r.info, r.err)
		}
	case <-ctx.Done():
		t.Fatal("Stop did not return after the grace period")
	}
}

// TestSnapshotConsistency polls Output while processes write and exit: the
// first snapshot that says "exited" must already carry the final text and
// an exit code.
func TestSnapshotConsistency(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(4096, 4096, 0))
	for i := range 20 {
		p := mustStart(t, m, agentproc.Request{Command: fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i"; i=$((i+1)); done`, 50*i)})
		ctx := testContext(t)
		var first *agentproc.Output
		for first == nil {
			out := p.Output()
			if !out.Running {
				first = &out
				break
			}
			if out.ExitCode != nil || out.Reason != "" {
				t.Fatalf("running snapshot with exit state: %+v", out.Info)
			}
			select {
			case <-ctx.Done():
				t.Fatal("process never exited")
			default:
			}
		}
		final := mustWait(t, p)
		if first.ExitCode == nil || *first.ExitCode != 0 || first.Reason != final.Reason {
			t.Errorf("first exited snapshot: got %+v, want exit code 0 and reason %q", first.Info, final.Reason)
		}
		if want := p.Output().Text; first.Text != want {
			t.Errorf("first exited snapshot text (%d bytes) differs from the final text (%d bytes)", len(first.Text), len(want))
		}
		if c, err := p.Read(0); err != nil || (first.Truncated == nil && !c.EOF) {
			t.Errorf("Read after exit: got (%+v, %v), want EOF for untruncated output", c, err)
		}
	}
}

// TestStopGivesGroupMembersTheGrace: when the shell dies of terminate at
// once, the members of its group that are still cleaning up get the grace
// period too, instead of being killed the moment the shell is gone.
func TestStopGivesGroupMembersTheGrace(t *testing.T) {
	t.Parallel()
	// A mock clock whose grace period is never advanced: Stop can only
	// return because the member finished its cleanup by itself.
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithGracePeriod(time.Minute))
	p := mustStart(t, m, agentproc.Request{Command: `(trap 'echo cleaning; sleep 0.2; echo cleaned; exit 0' TERM; echo ready; while :; do sleep 0.05; done) & wait`})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	info, err := p.Stop(testContext(t))
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if out := p.Output().Text; !strings.Contains(out, "cleaned") {
		t.Errorf("output got %q, want the member's cleanup to finish (\"cleaned\")", out)
	}
	if info.Reason != agentproc.ReasonKilled || info.Leftovers != 0 {
		t.Errorf("got reason %q leftovers %d, want %q and 0 (the member exited by itself)", info.Reason, info.Leftovers, agentproc.ReasonKilled)
	}
}

// TestStopAfterShellExitKeepsReason: a Stop that arrives after the shell
// exited by itself (its output still draining because an escaped process
// without the marker holds the pipe) signals nothing and must not claim
// the exit as its own.
func TestStopAfterShellExitKeepsReason(t *testing.T) {
	t.Parallel()
	// The pipe drain is how long the process still counts as running after
	// the shell's exit while the escapee holds the pipe: the window in
	// which Stop must arrive. Half the test deadline leaves a loaded
	// machine seconds to get from the shell's exit to Stop.
	m := newManager(t, agentproc.WithPipeDrain(testTimeout/2))
	// The escapee must have left the group before the shell exits: a child
	// forked by "setsid ... &" stays in the shell's group until setsid(2)
	// runs, and a Stop that arrives in that window rightly terminates a
	// live member and claims the exit. It must also have dropped the marker
	// (env -i), or the cleanup after the shell's exit kills it. So the shell
	// waits on a FIFO that the escapee opens only after both, from the sh
	// that env -i execs.
	fifo := filepath.Join(t.TempDir(), "escaped")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := mustStart(t, m, agentproc.Request{
		Command: `setsid env -i sh -c 'echo pid=$$ > "$1"; exec sleep 1000' sh "$FIFO" & read x < "$FIFO"; echo "ready $x"; exit 0`,
		Env:     map[string]string{"FIFO": fifo},
	})
	// Event: the shell relays the escapee's PID, which the escapee wrote to
	// the FIFO once it was outside the group and without the marker.
	escapee := pidsIn(t, waitForOutput(t, p, regexp.MustCompile(`ready pid=\d+`))[0])[0]
	// Nothing here kills the escapee, so its PID cannot be reused before
	// this cleanup. It holds the pipe until the exit path gives up on it.
	t.Cleanup(func() { _ = unix.Kill(escapee, unix.SIGKILL) })
	// Event: the shell itself is gone (reaped, or a zombie).
	requireGone(t, []int{p.Info().PID})
	// The escapee holds the pipe, so the process is still running (for the
	// pipe drain after the shell's exit): Stop takes the stop path rather
	// than returning the final Info at once.
	if !p.Info().Running {
		t.Fatalf("got not running before Stop, want running while the escapee holds the pipe (output %q)", p.Output().Text)
	}
	info, err := p.Stop(testContext(t))
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if info.Reason != agentproc.ReasonExited || exitCode(info) != 0 {
		t.Errorf("got reason %q code %d, want %q and 0", info.Reason, exitCode(info), agentproc.ReasonExited)
	}
}
