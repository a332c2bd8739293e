//go:build unix

package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// helperRequest returns a Request that runs the test binary as a helper in
// the given mode, exec'd by the shell so that signals reach it directly.
func helperRequest(t testing.TB, mode string) agentproc.Request {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return agentproc.Request{
		Command: "exec " + shellQuote(exe),
		Env:     map[string]string{helperEnv: mode},
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// waitForOutput waits until the process's output matches re and returns
// the submatches. It wakes on every write through WaitOutput (no poll
// timer) and matches against Output's text, so a pattern may span lines.
func waitForOutput(t *testing.T, p *agentproc.Process, re *regexp.Regexp) []string {
	t.Helper()
	ctx := testContext(t)
	var next int64
	for {
		if m := re.FindStringSubmatch(p.Output().Text); m != nil {
			return m
		}
		c, err := p.WaitOutput(ctx, next)
		if err != nil {
			t.Fatalf("output never matched %v (%v); got %q", re, err, p.Output().Text)
		}
		if c.EOF {
			if m := re.FindStringSubmatch(p.Output().Text); m != nil {
				return m
			}
			t.Fatalf("process exited before output matched %v; got %q", re, p.Output().Text)
		}
		next = c.Next
	}
}

// pidsIn returns every PID printed as "pid=N" in the output.
func pidsIn(t *testing.T, text string) []int {
	t.Helper()
	var pids []int
	for _, m := range regexp.MustCompile(`pid=(\d+)`).FindAllStringSubmatch(text, -1) {
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatalf("no pid=N in output %q", text)
	}
	return pids
}

// alive reports whether pid is a live, non-zombie process: from /proc
// through the package's reader on Linux, else from kill(pid, 0), which
// also counts zombies.
func alive(pid int) bool {
	if state, ok := agentproc.ProcState(pid); ok {
		return state != 'Z'
	}
	if runtime.GOOS == "linux" {
		return false // gone from /proc
	}
	return unix.Kill(pid, 0) == nil
}

// requireGone waits (under the test deadline) until none of pids is alive.
// Processes that held the output pipe are already gone when Wait returns;
// the wait covers the others, whose SIGKILL is delivered asynchronously.
// The event is each process's exit, seen through a pidfd on Linux; other
// systems poll /proc or kill(pid, 0), having no such event for a process
// that is not our child.
func requireGone(t *testing.T, pids []int) {
	t.Helper()
	ctx := testContext(t)
	var left []int
	for _, pid := range pids {
		if exited, ok := waitExit(ctx, pid); ok && exited {
			continue
		}
		left = append(left, pid)
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		left = slices.DeleteFunc(left, func(pid int) bool { return !alive(pid) })
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("processes still alive: got %v, want none", left)
		case <-tick.C:
		}
	}
}

func TestStderrCaptured(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo out; echo err >&2; echo out2"})
	mustWait(t, p)
	if got, want := p.Output().Text, "out\nerr\nout2\n"; got != want {
		t.Errorf("output got %q, want %q", got, want)
	}
}

func TestExitCode42(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "exit 42"})
	info := mustWait(t, p)
	if got := exitCode(info); got != 42 {
		t.Errorf("exit code got %d, want 42", got)
	}
	if info.Reason != agentproc.ReasonExited || info.Signal != "" {
		t.Errorf("reason/signal got %q/%q, want exited/\"\"", info.Reason, info.Signal)
	}
}

func TestWorkDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	provided := t.TempDir()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skipf("no home directory: %v", err)
	}
	tests := []struct {
		name     string
		provider func() string
		reqDir   string
		want     string
	}{
		{"request dir", nil, dir, dir},
		{"provider dir", func() string { return provided }, "", provided},
		{"request beats provider", func() string { return provided }, dir, dir},
		{"provider missing falls back to home", func() string { return filepath.Join(dir, "gone") }, "", home},
		{"no provider uses home", nil, "", home},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []agentproc.Option
			if tt.provider != nil {
				opts = append(opts, agentproc.WithWorkDir(tt.provider))
			}
			m := newManager(t, opts...)
			p := mustStart(t, m, agentproc.Request{Command: "pwd -P", WorkDir: tt.reqDir})
			info := mustWait(t, p)
			want, err := filepath.EvalSymlinks(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(p.Output().Text); got != want {
				t.Errorf("pwd got %q, want %q", got, want)
			}
			if info.WorkDir != tt.want {
				t.Errorf("Info.WorkDir got %q, want %q", info.WorkDir, tt.want)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	t.Parallel()
	hook := func(base []string) ([]string, error) {
		return append(base, "HOOKED=hook", "BOTH=hook"), nil
	}
	failing := func([]string) ([]string, error) { return nil, errors.New("boom") }
	tests := []struct {
		name string
		hook func([]string) ([]string, error)
		env  map[string]string
		want string
	}{
		{"request env", nil, map[string]string{"REQ": "req", "BOTH": "req"}, "req||req|"},
		{"hook", hook, nil, "|hook|hook|"},
		{"request overrides hook", hook, map[string]string{"REQ": "req", "BOTH": "req"}, "req|hook|req|"},
		{"failing hook uses base", failing, map[string]string{"REQ": "req"}, "req|||"},
		{"request overrides os env", nil, map[string]string{"PATH": "/usr/bin:/bin", "REQ": "x"}, "x|||"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []agentproc.Option
			if tt.hook != nil {
				opts = append(opts, agentproc.WithEnv(tt.hook))
			}
			m := newManager(t, opts...)
			p := mustStart(t, m, agentproc.Request{
				Command: `printf '%s|%s|%s|%s\n' "$REQ" "$HOOKED" "$BOTH" "$(env | grep -c '^PATH=' | grep -v 1)"`,
				Env:     tt.env,
			})
			mustWait(t, p)
			if got := strings.TrimSpace(p.Output().Text); got != tt.want {
				t.Errorf("env got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMarkerEnv(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: `echo "$AGENTPROC_ID"`, Env: map[string]string{agentproc.MarkerEnv: "forged"}})
	mustWait(t, p)
	if got := strings.TrimSpace(p.Output().Text); got != p.ID() {
		t.Errorf("marker got %q, want the process ID %q", got, p.ID())
	}
}

func TestListOrder(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	exited1 := mustStart(t, m, agentproc.Request{Command: "true"})
	mustWait(t, exited1)
	running1 := mustStart(t, m, agentproc.Request{Command: "sleep 1000", Background: true})
	exited2 := mustStart(t, m, agentproc.Request{Command: "true"})
	mustWait(t, exited2)
	running2 := mustStart(t, m, agentproc.Request{Command: "sleep 1000", Background: true})

	want := []string{running2.ID(), running1.ID(), exited2.ID(), exited1.ID()}
	for range 3 { // stable across calls
		var got []string
		for _, info := range m.List() {
			got = append(got, info.ID)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("List order got %v, want %v", got, want)
		}
	}
	for _, p := range []*agentproc.Process{running1, running2} {
		if _, err := p.Stop(testContext(t)); err != nil {
			t.Fatal(err)
		}
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

func TestOwnerIsolation(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	alice, bob := m.Scope("alice"), m.Scope("bob")
	pa := mustStart(t, alice, agentproc.Request{Command: "sleep 1000"})
	pb := mustStart(t, bob, agentproc.Request{Command: "sleep 1000"})

	if _, err := alice.Get(pb.ID()); !errors.Is(err, agentproc.ErrNotFound) {
		t.Errorf("alice.Get(bob's): got %v, want ErrNotFound", err)
	}
	if got, err := alice.Get(pa.ID()); err != nil || got != pa {
		t.Errorf("alice.Get(own): got (%v, %v), want her process", got, err)
	}
	if got := alice.List(); len(got) != 1 || got[0].ID != pa.ID() || got[0].Owner != "alice" {
		t.Errorf("alice.List: got %+v, want only her process", got)
	}
	if got := m.Scope("").List(); len(got) != 0 {
		t.Errorf("unowned scope List: got %d, want 0", len(got))
	}
	if got := len(m.List()); got != 2 {
		t.Errorf("manager List: got %d, want 2", got)
	}
	// Signalling goes through Get, so another owner can never reach it.
	if p, err := bob.Get(pa.ID()); err == nil {
		_ = p.Signal(agentproc.SignalKill)
		t.Errorf("bob.Get(alice's): got the process, want ErrNotFound")
	}
	if !pa.Info().Running {
		t.Errorf("alice's process stopped by bob's scope")
	}
	for _, p := range []*agentproc.Process{pa, pb} {
		if _, err := p.Stop(testContext(t)); err != nil {
			t.Fatal(err)
		}
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
		if info.Running || info.Signal != "SIGKILL" {
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
		if exitCode(info) != tt.wantCode || info.Signal != tt.wantName || info.Reason != agentproc.ReasonKilled {
			t.Errorf("%s: got code %d signal %q reason %q, want %d %q %q",
				tt.sig, exitCode(info), info.Signal, info.Reason, tt.wantCode, tt.wantName, agentproc.ReasonKilled)
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
	if info.Reason != agentproc.ReasonSignaled || info.Signal != "SIGTERM" || exitCode(info) != 143 {
		t.Errorf("got reason %q signal %q code %d, want signaled SIGTERM 143", info.Reason, info.Signal, exitCode(info))
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

func TestMaxRunning(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithMaxRunning(1))
	p := mustStart(t, m, agentproc.Request{Command: "sleep 1000"})
	if _, err := m.Start(agentproc.Request{Command: "true"}); !errors.Is(err, agentproc.ErrTooManyProcesses) {
		t.Errorf("second Start: got %v, want ErrTooManyProcesses", err)
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
	q := mustStart(t, m, agentproc.Request{Command: "true"})
	mustWait(t, q)
}

func TestTruncatedOutputCounts(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(1000, 1000, 0))
	// 20000 lines "line NNNNN\n" of 11 bytes each: 220 kB against 2 kB kept.
	// Few enough that the CPU-bound loop ends well inside the test deadline
	// on a loaded machine.
	p := mustStart(t, m, agentproc.Request{Command: `i=0; while [ $i -lt 20000 ]; do printf 'line %05d\n' $i; i=$((i+1)); done`})
	mustWait(t, p)
	out := p.Output()
	if out.Truncated == nil {
		t.Fatalf("Truncated got nil, want counts")
	}
	tr := out.Truncated
	if tr.OriginalBytes != 220000 || tr.RetainedBytes+tr.OmittedBytes != tr.OriginalBytes || tr.RetainedBytes > 2000 || tr.Strategy != "head_tail" {
		t.Errorf("Truncation got %+v, want 220000 original, at most 2000 retained, head_tail", tr)
	}
	if !strings.HasPrefix(out.Text, "line 00000\nline 00001\n") || !strings.HasSuffix(out.Text, "line 19998\nline 19999\n") {
		t.Errorf("text should keep head and tail; got %q...%q", out.Text[:30], out.Text[len(out.Text)-30:])
	}
	if !strings.Contains(out.Text, fmt.Sprintf("%d bytes omitted", tr.OmittedBytes)) {
		t.Errorf("text has no marker with %d omitted bytes", tr.OmittedBytes)
	}
}

// Output limits far beyond what a process writes cost what it writes: a
// 1<<50 tail used to panic the output reader, and a 1<<30 one to allocate
// 1 GiB per process once the head was full. Not parallel: it reads the
// heap's allocation total.
func TestOutputLimitsOutOfRange(t *testing.T) {
	const mib = 1 << 20
	for _, tail := range []int{1 << 30, 1 << 50} {
		m := newManager(t, agentproc.WithOutputLimits(4, tail, 0))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p := mustStart(t, m, agentproc.Request{Command: "head -c 1048576 /dev/zero | tr '\\0' x"})
		mustWait(t, p)
		out := p.Output()
		runtime.ReadMemStats(&after)
		if len(out.Text) != mib || out.Truncated != nil {
			t.Errorf("tail %d: got %d bytes (%+v), want the whole MiB", tail, len(out.Text), out.Truncated)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64*mib {
			t.Errorf("tail %d: allocated %d MiB for 1 MiB of output, want at most 64", tail, grew/mib)
		}
	}
}

func TestContiguousHeadTail(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(10, 10, 0))
	p := mustStart(t, m, agentproc.Request{Command: `printf '0123456789abcdefghij'`})
	mustWait(t, p)
	out := p.Output()
	if out.Text != "0123456789abcdefghij" || out.Truncated != nil {
		t.Errorf("got %q %+v, want the 20 bytes unchanged and no truncation", out.Text, out.Truncated)
	}
}

func TestSplitUTF8AtSeams(t *testing.T) {
	t.Parallel()
	// 3-byte runes with head and tail sizes that cut them at every offset.
	for head := 1; head <= 3; head++ {
		m := newManager(t, agentproc.WithOutputLimits(head*4+head%3, 7, 0))
		p := mustStart(t, m, agentproc.Request{Command: `i=0; while [ $i -lt 200 ]; do printf '€'; i=$((i+1)); done`})
		mustWait(t, p)
		text := p.Output().Text
		if strings.ContainsRune(text, '\uFFFD') {
			t.Errorf("head %d: text has U+FFFD: %q", head, text)
		}
	}
}

// TestTreeGone checks that background children and pipelines die with
// Stop, Close and the shell's own exit.
func TestTreeGone(t *testing.T) {
	t.Parallel()
	const tree = `sleep 1000 & echo pid=$!; sleep 1000 | sleep 1000 & echo pid=$!; echo ready; `
	stopVia := map[string]func(t *testing.T, m *agentproc.Manager, p *agentproc.Process){
		"stop": func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process) {
			info, err := p.Stop(testContext(t))
			if err != nil || info.Reason != agentproc.ReasonKilled {
				t.Errorf("Stop: got (%q, %v), want killed", info.Reason, err)
			}
		},
		"close": func(t *testing.T, m *agentproc.Manager, p *agentproc.Process) {
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if info := p.Info(); info.Running || info.Reason != agentproc.ReasonShutdown {
				t.Errorf("after Close: got %+v, want exited with reason shutdown", info)
			}
		},
		"shell exits": func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process) {
			info := mustWait(t, p)
			if info.Leftovers < 3 {
				t.Errorf("Leftovers got %d, want at least 3", info.Leftovers)
			}
		},
	}
	for name, stop := range stopVia {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t)
			cmd := tree + "wait"
			if name == "shell exits" {
				cmd = tree + "exit 0"
			}
			p := mustStart(t, m, agentproc.Request{Command: cmd})
			waitForOutput(t, p, regexp.MustCompile(`ready`))
			pids := pidsIn(t, p.Output().Text)
			stop(t, m, p)
			requireGone(t, pids)
		})
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
		if r.err != nil || r.info.Signal != "SIGKILL" || r.info.Reason != agentproc.ReasonKilled {
			t.Errorf("Stop: got (%+v, %v), want SIGKILL and reason killed", r.info, r.err)
		}
	case <-ctx.Done():
		t.Fatal("Stop did not return after the grace period")
	}
}

func TestCloseStopsAllInParallel(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := agentproc.New(agentproc.WithClock(clk), agentproc.WithGracePeriod(time.Minute))
	trap := clk.Trap().NewTimer("agentproc", "grace")
	defer trap.Close()
	var procs []*agentproc.Process
	for range 5 {
		p := mustStart(t, m, agentproc.Request{Command: `trap '' TERM; echo ready; while :; do sleep 1; done`})
		waitForOutput(t, p, regexp.MustCompile(`ready`))
		procs = append(procs, p)
	}
	ctx := testContext(t)
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	// All five grace timers start before any fires: one grace period in all.
	for range procs {
		trap.MustWait(ctx).MustRelease(ctx)
	}
	clk.Advance(time.Minute).MustWait(ctx)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	for _, p := range procs {
		if info := p.Info(); info.Running || info.Reason != agentproc.ReasonShutdown {
			t.Errorf("after Close: got %+v, want shutdown", info)
		}
	}
}

func TestBackgroundDetection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, command, wantCommand string
		detect, wantBackground     bool
		wantWarning                string
	}{
		{"trailing & promoted", "echo hi &", "echo hi", true, true, ""},
		{"comment after &", "echo hi & # server", "echo hi", true, true, ""},
		{"quoted & untouched", `echo "a &"`, `echo "a &"`, true, false, ""},
		{"nohup warned", "nohup echo hi &", "nohup echo hi", true, true, "nohup"},
		{"detection off", "echo hi &", "echo hi &", false, false, ""},
		{"unparsable runs unchanged", `echo "unterminated`, `echo "unterminated`, true, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, agentproc.WithBackgroundDetection(tt.detect))
			p := mustStart(t, m, agentproc.Request{Command: tt.command})
			info := mustWait(t, p)
			if info.Command != tt.wantCommand || info.Background != tt.wantBackground {
				t.Errorf("got command %q background %v, want %q %v", info.Command, info.Background, tt.wantCommand, tt.wantBackground)
			}
			if got := strings.Join(info.Warnings, "; "); !strings.Contains(got, tt.wantWarning) || (tt.wantWarning == "" && got != "") {
				t.Errorf("warnings got %q, want %q", got, tt.wantWarning)
			}
		})
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

// The shell is looked up in PATH once per value of PATH, and keeps the name
// it was given as $0. Not parallel: it changes PATH.
func TestShellFollowsPATH(t *testing.T) {
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo $0"})
	mustWait(t, p)
	if got := p.Output().Text; got != "sh\n" {
		t.Errorf("$0: got %q, want %q", got, "sh\n")
	}
	dir := t.TempDir()
	real, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	fake := "#!" + real + "\necho fake sh\n"
	if err := os.WriteFile(filepath.Join(dir, "sh"), []byte(fake), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	p = mustStart(t, m, agentproc.Request{Command: "echo real"})
	mustWait(t, p)
	if got := p.Output().Text; got != "fake sh\n" {
		t.Errorf("after PATH changed: got %q, want the shell found first in the new PATH", got)
	}
}
