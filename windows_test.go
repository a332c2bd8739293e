//go:build windows

package agentproc_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/windows"

	"github.com/agentproc/agentproc"
)

// These tests run real cmd.exe command lines and, for process trees, this
// test binary as a helper child (see helper_windows_test.go) that reports
// its PID over loopback, so a test can hold a handle to a grandchild and
// wait for it to be gone.

// lines splits Windows output into lines without their trailing blanks,
// which cmd.exe adds before `&` on some versions and not others.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func runOutput(t *testing.T, m *agentproc.Manager, req agentproc.Request) agentproc.Output {
	t.Helper()
	p := mustStart(t, m, req)
	mustWait(t, p)
	return p.Output()
}

func TestWindowsCmdLine(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	tests := []struct {
		command string
		want    []string
	}{
		{`echo "a & b"`, []string{`"a & b"`}},
		{`echo one & echo two`, []string{"one", "two"}},
		{`echo "x" | find "x"`, []string{`"x"`}},
		{`if "a"=="a" (echo same) else (echo different)`, []string{"same"}},
		{`echo 100%% ^& ^<done^>`, []string{"100%% & <done>"}},
	}
	for _, tt := range tests {
		out := runOutput(t, m, agentproc.Request{Command: tt.command})
		if got := lines(out.Text); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("%s: got %q, want %q", tt.command, got, tt.want)
		}
		if got := exitCode(out.Info); got != 0 {
			t.Errorf("%s: exit code got %d, want 0", tt.command, got)
		}
	}
}

func TestWindowsExitCode(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	for _, tt := range []struct {
		command string
		want    int
	}{
		{`exit /b 42`, 42},
		{`exit 3`, 3},
		{`echo ok`, 0},
		{`cmd /c exit 7`, 7},
	} {
		info := mustWait(t, mustStart(t, m, agentproc.Request{Command: tt.command}))
		if got := exitCode(info); got != tt.want {
			t.Errorf("%s: exit code got %d, want %d", tt.command, got, tt.want)
		}
		if info.Reason != agentproc.ReasonExited || info.ExitSignal != "" {
			t.Errorf("%s: reason, signal got %q, %q, want %q, \"\"", tt.command, info.Reason, info.ExitSignal, agentproc.ReasonExited)
		}
	}
}

func TestWindowsStderr(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	out := runOutput(t, m, agentproc.Request{Command: `echo out & echo err 1>&2`})
	if got, want := lines(out.Text), []string{"out", "err"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestWindowsEnvAndWorkDir(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	// Not t.TempDir: Wine 8.0 cannot run the os.RemoveAll of Go 1.26 on
	// nested directories (unlinkat: Invalid function); an empty directory
	// removed with os.Remove works everywhere.
	dir, err := os.MkdirTemp("", "agentproc-workdir")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	out := runOutput(t, m, agentproc.Request{
		Command: `echo [%AGENTPROC_TEST_FOO%] & cd`,
		WorkDir: dir,
		// Windows names are case-insensitive: this must replace, not
		// duplicate, a variable spelled AGENTPROC_TEST_FOO.
		Env: map[string]string{"agentproc_test_foo": "bar baz"},
	})
	got := lines(out.Text)
	if len(got) != 2 || got[0] != "[bar baz]" || !strings.EqualFold(got[1], dir) {
		t.Errorf("got %q, want [\"[bar baz]\" %q]", got, dir)
	}
}

// startTree starts a cmd.exe command line that runs the helper in mode
// (placed where %HELPER% appears) and waits for the helper to report.
func startTree(t *testing.T, m *agentproc.Manager, command, mode string) (*agentproc.Process, func(time.Duration) bool) {
	t.Helper()
	return startTreeTimeout(t, m, command, mode, 0)
}

// startTreeTimeout is startTree with a Request.Timeout.
func startTreeTimeout(t *testing.T, m *agentproc.Manager, command, mode string, timeout time.Duration) (*agentproc.Process, func(time.Duration) bool) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := agentproc.NewPIDReporter(t)
	p := mustStart(t, m, agentproc.Request{
		Command: strings.ReplaceAll(command, "%HELPER%", `"`+exe+`"`),
		Env:     map[string]string{agentproc.HelperEnv: agentproc.UseHelper(mode), agentproc.HelperAddrEnv: rep.Addr()},
		Timeout: timeout,
	})
	// A command line may also run a barrier helper (see
	// TestWindowsLeftoversKilled); it counts as reported here.
	want := 1 + strings.Count(command, "=barrier")
	var child windows.Handle
	for range want {
		if m, h := rep.Next(time.Now().Add(testTimeout)); m == mode {
			child = h
		}
	}
	rep.Release()
	return p, func(d time.Duration) bool { return agentproc.WaitGone(child, d) }
}

func TestWindowsStopKillsTree(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithGracePeriod(200*time.Millisecond))
	p, gone := startTree(t, m, `start /b "" %HELPER% & %HELPER%`, "sleep")
	info, err := p.Stop(testContext(t))
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if info.Running || info.Reason != agentproc.ReasonKilled {
		t.Errorf("Stop: running, reason got %v, %q, want false, %q", info.Running, info.Reason, agentproc.ReasonKilled)
	}
	if !gone(testTimeout) {
		t.Errorf("helper still running after Stop")
	}
	if err := p.Signal(agentproc.SignalKill); !errors.Is(err, agentproc.ErrNotRunning) {
		t.Errorf("Signal after exit: got %v, want ErrNotRunning", err)
	}
}

func TestWindowsTimeoutKillsTree(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithGracePeriod(time.Second))
	ctx := testContext(t)
	trap := clk.Trap().NewTimer("agentproc", "grace")
	defer trap.Close()
	p, gone := startTreeTimeout(t, m, `start /b "" %HELPER% & %HELPER%`, "sleep", time.Hour)
	// The timeout timer exists once Start returns; firing it starts the
	// stop ladder, whose grace timer is then passed too, in case
	// CTRL_BREAK_EVENT cannot be delivered (Wine).
	clk.Advance(time.Hour).MustWait(ctx)
	trap.MustWait(ctx).MustRelease(ctx)
	select {
	case <-p.Done():
	default:
		clk.Advance(time.Second).MustWait(ctx)
	}
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonTimeout {
		t.Errorf("reason got %q, want %q", info.Reason, agentproc.ReasonTimeout)
	}
	if !gone(testTimeout) {
		t.Errorf("helper still running after the timeout")
	}
}

func TestWindowsCloseKillsTree(t *testing.T) {
	t.Parallel()
	m := agentproc.New(agentproc.WithGracePeriod(200 * time.Millisecond))
	p, gone := startTree(t, m, `%HELPER%`, "sleep")
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !gone(testTimeout) {
		t.Errorf("helper still running after Close")
	}
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonShutdown {
		t.Errorf("reason got %q, want %q", info.Reason, agentproc.ReasonShutdown)
	}
}

func TestWindowsLeftoversKilled(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	// The shell starts the helper in the background and exits at once.
	// The barrier helper holds the shell until the background one has
	// reported its PID; then the shell exits, leaving the sleeper behind.
	p, gone := startTree(t, m, `start /b "" %HELPER% & set "`+agentproc.HelperEnv+`=`+agentproc.UseHelper("barrier")+`" & %HELPER%`, "sleep")
	info := mustWait(t, p)
	if info.Leftovers != 1 {
		t.Errorf("leftovers got %d, want 1", info.Leftovers)
	}
	if got := exitCode(info); got != 0 {
		t.Errorf("exit code got %d, want 0 (the shell's own)", got)
	}
	if !gone(testTimeout) {
		t.Errorf("helper still running after the shell exited")
	}
}

func TestWindowsStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	m := newManager(t, agentproc.WithGracePeriod(grace))
	p, gone := startTree(t, m, `%HELPER%`, "ignorebreak")
	start := time.Now()
	info, err := p.Stop(testContext(t))
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if elapsed := time.Since(start); elapsed < grace {
		t.Errorf("Stop returned after %v, want at least the grace period %v", elapsed, grace)
	}
	if info.Reason != agentproc.ReasonKilled {
		t.Errorf("reason got %q, want %q", info.Reason, agentproc.ReasonKilled)
	}
	if !gone(testTimeout) {
		t.Errorf("helper still running after Stop")
	}
}

func TestWindowsStopGraceful(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithGracePeriod(testTimeout))
	p, _ := startTree(t, m, `%HELPER%`, "onbreak")
	if err := p.Signal(agentproc.SignalInterrupt); err != nil {
		if agentproc.UnderWine() {
			_ = p.Signal(agentproc.SignalKill) // spares Close the grace period
			t.Skipf("Wine 8.0 cannot deliver CTRL_BREAK_EVENT to a process group (GenerateConsoleCtrlEvent: %v)", err)
		}
		t.Fatalf("Signal(interrupt): %v", err)
	}
	info := mustWait(t, p)
	if got := exitCode(info); got != 3 {
		t.Errorf("exit code got %d, want 3 (the helper's answer to Ctrl+Break)", got)
	}
	if !strings.Contains(p.Output().Text, "got break") {
		t.Errorf("output got %q, want it to contain %q", p.Output().Text, "got break")
	}
}

func TestWindowsOutputTruncated(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(64, 64, 0))
	out := runOutput(t, m, agentproc.Request{Command: `for /l %i in (1,1,300) do @echo line %i`})
	if out.Truncated == nil {
		t.Fatalf("Truncated got nil, want set (output %d bytes)", len(out.Text))
	}
	if !strings.HasPrefix(out.Text, "line 1\r\n") || !strings.HasSuffix(out.Text, "line 300\r\n") {
		t.Errorf("got %q, want head from line 1 and tail to line 300", out.Text)
	}
	if out.Truncated.OmittedBytes <= 0 {
		t.Errorf("omitted bytes got %d, want > 0", out.Truncated.OmittedBytes)
	}
}

func TestWindowsWaitDeadline(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithGracePeriod(0))
	p, gone := startTree(t, m, `%HELPER%`, "sleep")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	info, err := p.Wait(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !info.Running {
		t.Errorf("Wait: got %v, running %v, want DeadlineExceeded, true", err, info.Running)
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !gone(testTimeout) {
		t.Errorf("helper still running after Stop")
	}
}

func TestWindowsCustomShell(t *testing.T) {
	t.Parallel()
	// cmd.exe named by its full path must still get the verbatim command
	// line; Go's quoting would turn the quotes into \".
	m := newManager(t, agentproc.WithShell(os.Getenv("ComSpec"), "/d", "/s", "/c"))
	out := runOutput(t, m, agentproc.Request{Command: `echo "a & b"`})
	if got := lines(out.Text); len(got) != 1 || got[0] != `"a & b"` {
		t.Errorf("got %q, want %q", got, []string{`"a & b"`})
	}
}

func TestWindowsStdin(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary as a cat: Wine's findstr and more do not echo a pipe.
	p := mustStart(t, m, agentproc.Request{
		Command: `"` + exe + `"`,
		Env:     map[string]string{agentproc.HelperEnv: agentproc.UseHelper("cat")},
		Stdin:   true,
	})
	if _, err := p.WriteStdin(t.Context(), []byte("hello stdin\r\n")); err != nil {
		t.Fatalf("WriteStdin: %v", err)
	}
	if err := p.CloseStdin(t.Context()); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	info := mustWait(t, p)
	if got := lines(p.Output().Text); len(got) != 1 || got[0] != "hello stdin" {
		t.Errorf("output got %q, want [\"hello stdin\"]", got)
	}
	if got := exitCode(info); got != 0 {
		t.Errorf("exit code got %d, want 0", got)
	}
	if _, err := p.WriteStdin(t.Context(), []byte("late")); !errors.Is(err, agentproc.ErrStdinClosed) {
		t.Errorf("WriteStdin after exit: got %v, want ErrStdinClosed", err)
	}
}

func TestWindowsTTYUnsupported(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	_, err := m.Start(t.Context(), agentproc.Request{Command: "echo hi", TTY: &agentproc.TTYSize{Rows: 24, Cols: 80}})
	if !errors.Is(err, agentproc.ErrUnsupported) || !strings.Contains(err.Error(), "windows") {
		t.Errorf("Start with TTY: got %v, want ErrUnsupported naming windows", err)
	}
}

func TestWindowsMultiLineRejected(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	_, err := m.Start(t.Context(), agentproc.Request{Command: "echo one\r\necho two"})
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), "first line") {
		t.Errorf("multi-line command: got %v, want ErrInvalidRequest explaining cmd.exe runs only the first line", err)
	}
	// A trailing line break is harmless and accepted.
	out := runOutput(t, m, agentproc.Request{Command: "echo one\r\n"})
	if got := lines(out.Text); len(got) != 1 || got[0] != "one" {
		t.Errorf("trailing newline: got %q, want [\"one\"]", got)
	}
}

func TestWindowsKillReason(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p, gone := startTree(t, m, `%HELPER%`, "sleep")
	if err := p.Signal(agentproc.SignalKill); err != nil {
		t.Fatalf("Signal(kill): %v", err)
	}
	info := mustWait(t, p)
	if info.Reason != agentproc.ReasonKilled || info.ExitSignal != "TerminateJobObject" {
		t.Errorf("reason, signal got %q, %q, want %q, %q", info.Reason, info.ExitSignal, agentproc.ReasonKilled, "TerminateJobObject")
	}
	if !gone(testTimeout) {
		t.Errorf("helper still running after Signal(kill)")
	}
	// exit 1 by itself stays an exit, although the job kill uses code 1.
	info = mustWait(t, mustStart(t, m, agentproc.Request{Command: `exit 1`}))
	if info.Reason != agentproc.ReasonExited || info.ExitSignal != "" {
		t.Errorf("exit 1: reason, signal got %q, %q, want %q, \"\"", info.Reason, info.ExitSignal, agentproc.ReasonExited)
	}
}

// TestWindowsDrainBoundedOutsideJob gives a process outside the job (this
// test binary) a copy of the child's output pipe, as a process started
// through runas or a member stuck in termination would hold it: the job
// kill cannot close it, and Stop must still return within the drain bound.
func TestWindowsDrainBoundedOutsideJob(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithGracePeriod(100*time.Millisecond))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := agentproc.NewPIDReporter(t)
	p := mustStart(t, m, agentproc.Request{
		Command: `"` + exe + `"`,
		Env:     map[string]string{agentproc.HelperEnv: agentproc.UseHelper("sleep"), agentproc.HelperAddrEnv: rep.Addr()},
	})
	helper := rep.NextReport(time.Now().Add(testTimeout))
	hp, err := windows.OpenProcess(windows.PROCESS_DUP_HANDLE, false, helper.PID)
	if err != nil {
		t.Fatalf("open helper: %v", err)
	}
	var dup windows.Handle
	err = windows.DuplicateHandle(hp, windows.Handle(helper.Stdout), windows.CurrentProcess(), &dup, 0, false, windows.DUPLICATE_SAME_ACCESS)
	_ = windows.CloseHandle(hp)
	if err != nil {
		t.Fatalf("duplicate the helper's stdout: %v", err)
	}
	// Registered after newManager's Close: runs first, so that an unbounded
	// drain (the bug) fails this test instead of hanging Close.
	t.Cleanup(func() { _ = windows.CloseHandle(dup) })

	start := time.Now()
	info, err := p.Stop(testContext(t))
	if err != nil || info.Running {
		t.Fatalf("Stop with the pipe held outside the job: got %v, running %v, want the exit within the drain bound", err, info.Running)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second+5*time.Second {
		t.Errorf("Stop took %v, want at most the 2s drain plus slack", elapsed)
	}
}

// TestWindowsStdinNeverRead writes more than the pipe holds to a child that
// never reads: the write returns within the stall bound with the count of
// what went in, as on Unix (the overlapped pipe takes a write deadline; a
// synchronous one could only be abandoned, reporting nothing written).
func TestWindowsStdinNeverRead(t *testing.T) {
	t.Parallel()
	const stall = 200 * time.Millisecond
	// A short grace: the helper ignores nothing, but under Wine the break
	// never arrives, so the Stop below always waits the whole grace, and
	// the default 5 s left a loaded run too little of the 10 s deadline.
	m := newManager(t, agentproc.WithStdinStall(stall), agentproc.WithGracePeriod(500*time.Millisecond))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rep := agentproc.NewPIDReporter(t)
	p := mustStart(t, m, agentproc.Request{
		Command: `"` + exe + `"`,
		Env:     map[string]string{agentproc.HelperEnv: agentproc.UseHelper("sleep"), agentproc.HelperAddrEnv: rep.Addr()},
		Stdin:   true,
	})
	rep.Next(time.Now().Add(testTimeout))
	big := make([]byte, 4<<20)
	start := time.Now()
	n, err := p.WriteStdin(t.Context(), big)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n <= 0 || n >= len(big) {
		t.Errorf("WriteStdin: got (%d, %v), want part of it written and os.ErrDeadlineExceeded", n, err)
	}
	if elapsed := time.Since(start); elapsed > testTimeout {
		t.Errorf("WriteStdin took %v, want about the %v stall bound", elapsed, stall)
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
}
