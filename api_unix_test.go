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

// The tests in this file hold the package to doc.go's promise that every
// call that can block takes a context and returns ctx.Err() when it ends.

// TestShutdownContextKills: a process that ignores SIGTERM keeps Shutdown
// in its grace period; ending Shutdown's ctx kills it at once, Shutdown
// returns ctx.Err(), and Close then waits for the exit to be recorded.
func TestShutdownContextKills(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := agentproc.New(agentproc.WithClock(clk), agentproc.WithGracePeriod(time.Hour))
	trap := clk.Trap().NewTimer("agentproc", "grace")
	defer trap.Close()
	p := mustStart(t, m, agentproc.Request{Command: `trap '' TERM; echo ready; while :; do sleep 1; done`})
	waitForOutput(t, p, regexp.MustCompile(`ready`))

	ctx := testContext(t)
	shutdownCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- m.Shutdown(shutdownCtx) }()
	// The grace timer is made right after terminate was sent: Shutdown is
	// now waiting out a grace period of an hour.
	trap.MustWait(ctx).MustRelease(ctx)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown: got %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("Shutdown did not return when its context ended")
	}
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonShutdown || info.ExitSignal != "SIGKILL" {
		t.Errorf("got reason %q signal %q, want %q SIGKILL", info.Reason, info.ExitSignal, agentproc.ReasonShutdown)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close after Shutdown: got %v, want nil", err)
	}
	if _, err := m.Start(ctx, agentproc.Request{Command: "true"}); !errors.Is(err, agentproc.ErrClosed) {
		t.Errorf("Start after Shutdown: got %v, want ErrClosed", err)
	}
}

// TestShutdownIdle: with nothing running Shutdown returns nil.
func TestShutdownIdle(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	mustWait(t, mustStart(t, m, agentproc.Request{Command: "true"}))
	if err := m.Shutdown(testContext(t)); err != nil {
		t.Errorf("Shutdown: got %v, want nil", err)
	}
}

// TestKeyedStartContext: a keyed Start that finds the key claimed by a Start
// still spawning waits for it, and gives up when its own ctx ends. The first
// Start is held in spawning by the WithEnv hook, which runs after the key
// was claimed.
func TestKeyedStartContext(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	m := newManager(t, agentproc.WithEnv(func(base []string) ([]string, error) {
		entered <- struct{}{}
		<-release
		return base, nil
	}))
	ctx := testContext(t)
	req := agentproc.Request{Command: "true", Key: "k"}
	first := make(chan error, 1)
	go func() {
		_, err := m.Start(ctx, req)
		first <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first Start never reached its spawn")
	}

	if _, err := m.Start(canceledContext(), req); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with an ended ctx: got %v, want context.Canceled", err)
	}
	// A deadline, not a cancel: Start is very likely waiting on the first
	// by the time it passes. If the wait ignored ctx, this Start would
	// block until release, which only comes after it returned.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() {
		_, err := m.Start(short, req)
		second <- err
	}()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second Start: got %v, want context.DeadlineExceeded", err)
		}
	case <-ctx.Done():
		t.Fatal("a keyed Start waiting on another did not return when its ctx ended")
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first Start: got %v, want nil", err)
	}
}

// TestCloseStdinContext: on a terminal CloseStdin writes the EOF character,
// which can wait; an ended ctx returns ctx.Err() and leaves stdin open.
func TestCloseStdinContext(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "cat; echo status:$?", TTY: &agentproc.TTYSize{}})
	if err := p.CloseStdin(canceledContext()); !errors.Is(err, context.Canceled) {
		t.Errorf("CloseStdin with an ended ctx: got %v, want context.Canceled", err)
	}
	if _, err := p.WriteStdin(canceledContext(), []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteStdin with an ended ctx: got %v, want context.Canceled", err)
	}
	mustWrite(t, p, "still open\n")
	if err := p.CloseStdin(testContext(t)); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	if info := mustWait(t, p); exitCode(info) != 0 {
		t.Errorf("exit code got %d, want 0", exitCode(info))
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
