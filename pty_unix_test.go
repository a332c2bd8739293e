//go:build unix && !aix

package agentproc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

func TestTTYIsTerminal(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{
		Command: `tty; stty size; test -t 0 && test -t 1 && test -t 2 && echo isatty`,
		TTY:     &agentproc.TTYSize{Rows: 33, Cols: 101},
	})
	if info := p.Info(); !info.TTY || !info.Stdin {
		t.Errorf("Info TTY/Stdin got %v/%v, want true/true", info.TTY, info.Stdin)
	}
	info := mustWait(t, p)
	if exitCode(info) != 0 {
		t.Errorf("exit code got %d, want 0", exitCode(info))
	}
	// Line endings are the terminal's CRLF, unchanged.
	want := regexp.MustCompile(`\A/dev/\S+\r\n33 101\r\nisatty\r\n\z`)
	if got := p.Output().Text; !want.MatchString(got) {
		t.Errorf("output got %q, want it to match %v", got, want)
	}
}

func TestTTYDefaultSize(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: `stty size`, TTY: &agentproc.TTYSize{}})
	mustWait(t, p)
	if got, want := p.Output().Text, "24 80\r\n"; got != want {
		t.Errorf("output got %q, want %q", got, want)
	}
}

func TestTTYCat(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "cat; echo status:$?", TTY: &agentproc.TTYSize{Rows: 24, Cols: 80}})
	mustWrite(t, p, "hello\n")
	// The terminal echoes the line, then cat writes it back.
	waitForOutput(t, p, regexp.MustCompile(`hello\r\nhello\r\n`))
	// A partial line takes two EOF characters: one to end the line, one
	// for EOF.
	mustWrite(t, p, "partial")
	if err := p.CloseStdin(t.Context()); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	if _, err := p.WriteStdin(t.Context(), []byte("late")); !errors.Is(err, agentproc.ErrStdinClosed) {
		t.Errorf("WriteStdin after CloseStdin: got %v, want ErrStdinClosed", err)
	}
	info := mustWait(t, p)
	if exitCode(info) != 0 {
		t.Errorf("exit code got %d, want 0", exitCode(info))
	}
	if got := p.Output().Text; !strings.HasPrefix(got, "hello\r\nhello\r\npartial") || !strings.HasSuffix(got, "partialstatus:0\r\n") {
		t.Errorf("output got %q, want the echoed and copied lines, then partialstatus:0", got)
	}
}

func TestTTYResize(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{
		Command: `stty size; echo ready; while read l; do stty size; done`,
		TTY:     &agentproc.TTYSize{Rows: 10, Cols: 20},
	})
	waitForOutput(t, p, regexp.MustCompile(`10 20\r\nready\r\n`))
	if err := p.Resize(50, 132); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	mustWrite(t, p, "again\n")
	waitForOutput(t, p, regexp.MustCompile(`50 132\r\n`))
	if err := p.Resize(0, 10); !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Errorf("Resize(0, 10): got %v, want ErrInvalidRequest", err)
	}
	if err := p.CloseStdin(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
	if err := p.Resize(30, 30); !errors.Is(err, agentproc.ErrNotRunning) {
		t.Errorf("Resize after exit: got %v, want ErrNotRunning", err)
	}
	if _, err := p.WriteStdin(t.Context(), []byte("x")); !errors.Is(err, agentproc.ErrStdinClosed) {
		t.Errorf("WriteStdin after exit: got %v, want ErrStdinClosed", err)
	}
}

// TestTTYWinch checks that Resize sends SIGWINCH to the foreground group.
// The shell waits in the wait builtin, which runs a trap for a signal that
// came at any point after the trap was set; a trap for a signal that comes
// just before a read builtin blocks runs only once the read returns.
func TestTTYWinch(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{
		Command: `trap 'stty size; exit 0' WINCH; echo ready; sleep 30 & wait; echo no-winch`,
		TTY:     &agentproc.TTYSize{Rows: 10, Cols: 20},
	})
	waitForOutput(t, p, regexp.MustCompile(`ready\r\n`))
	if err := p.Resize(40, 60); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	mustWait(t, p)
	if got, want := p.Output().Text, "ready\r\n40 60\r\n"; got != want {
		t.Errorf("output got %q, want %q", got, want)
	}
}

// TestTTYCtrlC writes the interrupt character: the line discipline sends
// SIGINT to the terminal's foreground process group.
func TestTTYCtrlC(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	// The inner shell prints ready and execs sleep; SIGINT ends it whether
	// it arrives before or after the exec, so there is no race to lose.
	p := mustStart(t, m, agentproc.Request{
		Command: `trap : INT; sh -c 'echo ready; exec sleep 1000'; echo after:$?`,
		TTY:     &agentproc.TTYSize{Rows: 24, Cols: 80},
	})
	waitForOutput(t, p, regexp.MustCompile(`ready\r\n`))
	mustWrite(t, p, "\x03")
	waitForOutput(t, p, regexp.MustCompile(`after:130\r\n`))
	info := mustWait(t, p)
	if exitCode(info) != 0 {
		t.Errorf("exit code got %d, want 0 (the shell trapped SIGINT)", exitCode(info))
	}
}

// TestTTYTreeGone checks that the session made for the terminal is still one
// process group that Stop and the shell's exit take down whole.
func TestTTYTreeGone(t *testing.T) {
	t.Parallel()
	const tree = `sleep 1000 & echo pid=$!; sleep 1000 | sleep 1000 & echo pid=$!; echo ready; `
	for _, tt := range []struct {
		name, tail string
	}{{"stop", "wait"}, {"shell exits", "exit 0"}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t)
			p := mustStart(t, m, agentproc.Request{Command: tree + tt.tail, TTY: &agentproc.TTYSize{}})
			waitForOutput(t, p, regexp.MustCompile(`ready`))
			pids := pidsIn(t, p.Output().Text)
			if tt.tail == "wait" {
				if info, err := p.Stop(testContext(t)); err != nil || info.Reason != agentproc.ReasonKilled {
					t.Errorf("Stop: got (%q, %v), want killed", info.Reason, err)
				}
			} else {
				mustWait(t, p)
			}
			requireGone(t, pids)
		})
	}
}

// TestTTYEscapedHolder checks the drain deadline on the PTY master: a
// process that left the session keeps the terminal open, yet Wait returns
// once the drain bound has passed.
func TestTTYEscapedHolder(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command")
	}
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{
		// Without the marker the escapee is out of reach of every sweep.
		Command: `setsid env -u ` + agentproc.MarkerEnv + ` sh -c 'echo pid=$$; echo ready; exec sleep 1000' & read x`,
		TTY:     &agentproc.TTYSize{},
	})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	pids := pidsIn(t, p.Output().Text)
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	})
	mustWrite(t, p, "exit\n")
	info := mustWait(t, p)
	if exitCode(info) != 0 {
		t.Errorf("exit code got %d, want 0", exitCode(info))
	}
	if !alive(pids[0]) {
		t.Errorf("escaped process %d gone, want it alive to hold the terminal", pids[0])
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(entries)
}

// TestTTYNoFDLeak runs 200 terminal processes (half end by themselves, half
// are stopped) and 50 stdin-pipe processes, and checks that the host holds
// no more descriptors afterwards. It is not parallel so that no other test
// opens files meanwhile.
func TestTTYNoFDLeak(t *testing.T) {
	m := newManager(t)
	// Warm up: the runtime's poller opens its descriptors on first use.
	warm := mustStart(t, m, agentproc.Request{Command: "cat", TTY: &agentproc.TTYSize{}, Stdin: true})
	if err := warm.CloseStdin(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustWait(t, warm)
	before := countFDs(t)

	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range 250 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			req := agentproc.Request{Command: "echo hi", TTY: &agentproc.TTYSize{}}
			switch {
			case i >= 200:
				req = agentproc.Request{Command: "cat", Stdin: true}
			case i%2 == 1:
				req.Command = "echo ready; exec sleep 1000"
			}
			p, err := m.Start(t.Context(), req)
			if err != nil {
				t.Errorf("Start: %v", err)
				return
			}
			switch {
			case i >= 200:
				_, _ = p.WriteStdin(testContext(t), []byte("x\n"))
				_ = p.CloseStdin(t.Context())
			case i%2 == 1:
				if _, err := p.Stop(testContext(t)); err != nil {
					t.Errorf("Stop: %v", err)
				}
			}
			if _, err := p.Wait(testContext(t)); err != nil {
				t.Errorf("Wait: %v", err)
			}
		})
	}
	wg.Wait()
	after := countFDs(t)
	t.Logf("open descriptors: %d before, %d after 250 processes", before, after)
	if after > before {
		t.Errorf("open descriptors: got %d after, want at most %d as before", after, before)
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
