//go:build unix

package agentproc_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
)

func TestTimeoutStopsThroughTheLadder(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithGracePeriod(3*time.Second))
	timeoutTrap := clk.Trap().NewTimer("agentproc", "timeout")
	defer timeoutTrap.Close()
	graceTrap := clk.Trap().NewTimer("agentproc", "grace")
	defer graceTrap.Close()
	ctx := testContext(t)

	started := make(chan *agentproc.Process, 1)
	go func() {
		started <- mustStart(t, m, agentproc.Request{
			Command: `trap 'echo got TERM' TERM; echo ready; while :; do sleep 1; done`,
			Timeout: time.Hour,
		})
	}()
	timeoutTrap.MustWait(ctx).MustRelease(ctx)
	p := <-started
	if got := p.Info().Timeout; got != time.Hour {
		t.Errorf("Info.Timeout: got %s, want 1h", got)
	}
	if _, err := p.WaitMatch(ctx, regexp.MustCompile(`^ready$`)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour - time.Second).MustWait(ctx)
	if info := p.Info(); !info.Running {
		t.Fatalf("before the timeout: got %+v, want running", info)
	}

	clk.Advance(time.Second).MustWait(ctx)
	// The grace timer starts after terminate was sent.
	graceTrap.MustWait(ctx).MustRelease(ctx)
	if _, err := p.WaitMatch(ctx, regexp.MustCompile(`^got TERM$`)); err != nil {
		t.Fatalf("terminate not seen: %v", err)
	}
	if info := p.Info(); !info.Running {
		t.Fatalf("during the grace period: got %+v, want running", info)
	}
	clk.Advance(3 * time.Second).MustWait(ctx)
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonTimeout || info.ExitSignal != "SIGKILL" {
		t.Errorf("got reason %q signal %q, want %q SIGKILL", info.Reason, info.ExitSignal, agentproc.ReasonTimeout)
	}
}

func TestTimeoutDoesNotBoundWaits(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk))
	p := mustStart(t, m, agentproc.Request{Command: "exec sleep 1000", Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(testContext(t), 20*time.Millisecond)
	defer cancel()
	info, err := p.Wait(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !info.Running {
		t.Errorf("Wait: got (%+v, %v), want running and DeadlineExceeded", info, err)
	}
	if info, err := p.Stop(testContext(t)); err != nil || info.Reason != agentproc.ReasonKilled {
		t.Errorf("Stop: got (%q, %v), want reason killed", info.Reason, err)
	}
}

func TestTimeoutNotReachedExitsNormally(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk))
	p := mustStart(t, m, agentproc.Request{Command: "exit 3", Timeout: time.Minute})
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonExited || exitCode(info) != 3 {
		t.Errorf("got reason %q code %d, want exited 3", info.Reason, exitCode(info))
	}
	clk.Advance(time.Minute).MustWait(testContext(t))
	if got := p.Info(); got.Reason != agentproc.ReasonExited {
		t.Errorf("after the timeout would have passed: reason %q, want exited", got.Reason)
	}
}
