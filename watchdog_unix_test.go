//go:build unix

package agentproc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
)

func TestIdleTimeoutStops(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk))
	ctx := testContext(t)
	idleTrap := clk.Trap().NewTimer("agentproc", "idle")
	defer idleTrap.Close()
	resetTrap := clk.Trap().TimerReset("agentproc", "idle")
	defer resetTrap.Close()

	started := make(chan *agentproc.Process, 1)
	go func() {
		started <- mustStart(t, m, agentproc.Request{Command: "echo ready; exec sleep 1000", IdleTimeout: time.Minute})
	}()
	idleTrap.MustWait(ctx).MustRelease(ctx)
	p := <-started
	if got := p.Info().IdleTimeout; got != time.Minute {
		t.Errorf("Info.IdleTimeout: got %s, want 1m", got)
	}
	// "ready" is output: the watcher restarts the idle period for it.
	resetTrap.MustWait(ctx).MustRelease(ctx)
	clk.Advance(time.Minute - time.Nanosecond).MustWait(ctx)
	if info := p.Info(); !info.Running {
		t.Fatalf("before the idle timeout: got %+v, want running", info)
	}
	clk.Advance(time.Nanosecond).MustWait(ctx)
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonIdle {
		t.Errorf("reason: got %q, want %q", info.Reason, agentproc.ReasonIdle)
	}
	if out := p.Output().Text; out != "ready\n" {
		t.Errorf("output: got %q, want %q", out, "ready\n")
	}
	requireGone(t, []int{info.PID})
}

// TestIdleTimeoutResetByOutput feeds an interactive process lines that it
// echoes: each echo restarts the idle period, and silence ends it.
func TestIdleTimeoutResetByOutput(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk))
	ctx := testContext(t)
	resetTrap := clk.Trap().TimerReset("agentproc", "idle")
	defer resetTrap.Close()

	p := mustStart(t, m, agentproc.Request{
		Command:     `while read l; do echo "got $l"; done`,
		Stdin:       true,
		IdleTimeout: time.Minute, IdleInteractive: true,
	})
	for i := range 3 {
		clk.Advance(40 * time.Second).MustWait(ctx)
		if _, err := p.WriteStdin(ctx, fmt.Appendf(nil, "%d\n", i)); err != nil {
			t.Fatal(err)
		}
		// The echo is output: the watcher resets the timer for it.
		resetTrap.MustWait(ctx).MustRelease(ctx)
		if info := p.Info(); !info.Running {
			t.Fatalf("after %d×40s with output between: got %+v, want running", i+1, info)
		}
	}
	if d, ok := clk.Peek(); !ok || d != time.Minute {
		t.Fatalf("next timer: got %s %v, want the idle timer a minute away", d, ok)
	}
	clk.Advance(time.Minute).MustWait(ctx)
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonIdle {
		t.Errorf("reason: got %q, want %q", info.Reason, agentproc.ReasonIdle)
	}
	if out := p.Output().Text; out != "got 0\ngot 1\ngot 2\n" {
		t.Errorf("output: got %q", out)
	}
	requireGone(t, []int{info.PID})
}

func TestWatchdogRequestsValidated(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	for _, req := range []agentproc.Request{
		{Command: "true", IdleTimeout: -time.Second},
		{Command: "true", MaxOutput: -1},
		{Command: "cat", Stdin: true, IdleTimeout: time.Second},
		{Command: "true", Limits: agentproc.Limits{Memory: -1}},
		{Command: "true", Limits: agentproc.Limits{Memory: 4096}},
		{Command: "true", Limits: agentproc.Limits{Procs: -1}},
		{Command: "true", Limits: agentproc.Limits{CPU: -0.5}},
	} {
		if p, err := m.Start(t.Context(), req); !errors.Is(err, agentproc.ErrInvalidRequest) {
			if err == nil {
				mustWait(t, p)
			}
			t.Errorf("Start(%+v): got %v, want ErrInvalidRequest", req, err)
		}
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List after rejected requests: got %d processes, want 0", len(got))
	}
}

func TestMaxOutputStopsFlood(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t, agentproc.WithOutputLog(dir, 0))
	const limit = 1 << 20
	p := mustStart(t, m, agentproc.Request{Command: "yes", MaxOutput: limit})
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonOutputLimit {
		t.Errorf("reason: got %q, want %q", info.Reason, agentproc.ReasonOutputLimit)
	}
	if info.MaxOutput != limit {
		t.Errorf("Info.MaxOutput: got %d, want %d", info.MaxOutput, limit)
	}
	out := p.Output()
	if out.Truncated == nil || out.Truncated.OriginalBytes <= limit {
		t.Fatalf("output: got truncation %+v, want more than %d bytes written", out.Truncated, limit)
	}
	if !strings.HasPrefix(out.Text, "y\ny\n") || !strings.HasSuffix(out.Text, "y\n") {
		t.Errorf("output: got %q...%q, want head and tail of y lines", out.Text[:8], out.Text[len(out.Text)-8:])
	}
	log, err := os.ReadFile(filepath.Join(dir, p.ID()+".log"))
	if err != nil {
		t.Fatalf("output log: %v", err)
	}
	// The log accounts for every byte: what it holds, plus the gaps it
	// marks when its writer falls more than its backlog behind a flood
	// (which a loaded machine can make happen with yes).
	logged, gaps := logAccounting(log)
	if logged+gaps != out.Truncated.OriginalBytes {
		t.Errorf("output log: got %d bytes logged + %d marked as not logged, want %d in all",
			logged, gaps, out.Truncated.OriginalBytes)
	}
	requireGone(t, []int{info.PID})
}

func TestMaxOutputNotReached(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo hello", MaxOutput: 6})
	if info := mustWait(t, p); info.Reason != agentproc.ReasonExited || exitCode(info) != 0 {
		t.Errorf("6 bytes under MaxOutput 6: got reason %q code %d, want exited 0", info.Reason, exitCode(info))
	}
}

func TestScopeStopAll(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithGracePeriod(5*time.Second))
	ctx := testContext(t)
	chat, other := m.Scope("chat"), m.Scope("other")
	var chatProcs, otherProcs []*agentproc.Process
	for range 50 {
		chatProcs = append(chatProcs, mustStart(t, chat, agentproc.Request{Command: "echo ready; exec sleep 1000"}))
	}
	for range 5 {
		otherProcs = append(otherProcs, mustStart(t, other, agentproc.Request{Command: "echo ready; exec sleep 1000"}))
	}
	done := mustStart(t, chat, agentproc.Request{Command: "true"})
	mustWait(t, done)
	for _, p := range append(slices.Clone(chatProcs), otherProcs...) {
		if _, err := p.WaitMatch(ctx, regexp.MustCompile(`^ready$`)); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	infos, err := chat.StopAll(ctx)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 50 {
		t.Fatalf("StopAll: got %d Infos, want 50 (the exited one is not stopped)", len(infos))
	}
	// sleep dies on SIGTERM: stopping 50 at once takes nowhere near one
	// grace period, let alone 50.
	if elapsed > 5*time.Second {
		t.Errorf("StopAll took %s, want less than one grace period", elapsed)
	}
	ids := make(map[string]bool)
	for _, info := range infos {
		ids[info.ID] = true
		if info.Running || info.Reason != agentproc.ReasonKilled || info.Owner != "chat" {
			t.Errorf("stopped Info: got running %v reason %q owner %q, want exited, killed, chat",
				info.Running, info.Reason, info.Owner)
		}
	}
	for _, p := range chatProcs {
		if !ids[p.ID()] {
			t.Errorf("process %s of chat: not in StopAll's Infos", p.ID())
		}
	}
	for _, p := range otherProcs {
		if info := p.Info(); !info.Running {
			t.Errorf("process of other: got %+v, want running", info)
		}
	}
	if infos, err := chat.StopAll(ctx); err != nil || len(infos) != 0 {
		t.Errorf("second StopAll: got %d Infos, %v; want none", len(infos), err)
	}
}

// TestScopeStopAllConcurrentStops checks StopAll against Stops of the same
// processes racing it: every process ends once, with one reason.
func TestScopeStopAllConcurrentStops(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	ctx := testContext(t)
	s := m.Scope("x")
	var ps []*agentproc.Process
	for range 5 {
		ps = append(ps, mustStart(t, s, agentproc.Request{Command: "exec sleep 1000"}))
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() { _, _ = p.Stop(ctx) })
	}
	if _, err := s.StopAll(ctx); err != nil {
		t.Error(err)
	}
	wg.Wait()
	for _, p := range ps {
		if info := p.Info(); info.Running || info.Reason != agentproc.ReasonKilled {
			t.Errorf("got running %v reason %q, want killed", info.Running, info.Reason)
		}
	}
}

// notLogged matches the marker the output log writes for a gap.
var notLogged = regexp.MustCompile(`\n\[agentproc: (\d+) bytes not logged: the disk fell behind\]\n`)

// logAccounting returns how many of the process's bytes a log holds and
// how many its gap markers say were not logged.
func logAccounting(log []byte) (logged, gaps int64) {
	logged = int64(len(log))
	for _, m := range notLogged.FindAllSubmatch(log, -1) {
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		gaps += n
		logged -= int64(len(m[0]))
	}
	return logged, gaps
}
