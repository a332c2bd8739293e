//go:build unix

package agentproc_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// The helper modes the Unix tests use; see the registry in helper_test.go.
func init() {
	// ready prints "ready" once the runtime's signal handling is set up,
	// then blocks until a signal ends the process.
	agentproc.RegisterHelper("ready", func() int {
		fmt.Println("ready")
		time.Sleep(time.Hour) // a child waiting to be signalled, not synchronisation
		return 0
	}, false)
	// pieces writes the pieces of helperPiecesEnv one by one, waiting for a
	// byte on the FIFO at helperFIFOEnv between two pieces.
	agentproc.RegisterHelper("pieces", helperPieces, false)
	// stream writes helperBytesEnv bytes of text in 64 KiB writes.
	agentproc.RegisterHelper("stream", helperStream, true)
	// ticks writes, for each byte read from the FIFO at helperFIFOEnv, one
	// line holding the wall clock in Unix nanoseconds.
	agentproc.RegisterHelper("ticks", helperTicks, true)
	// term prints "ready pid=N" once SIGTERM is handled, then on SIGTERM
	// prints "terminated pid=N" and exits 0.
	agentproc.RegisterHelper("term", helperTerm, false)
	// ttyhost acts as an agent host running in a terminal (see
	// TestChildCannotTakeHostTerminal).
	agentproc.RegisterHelper("ttyhost", helperTTYHost, false)
}

// helperTerm is the "term" helper mode.
func helperTerm() int {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	fmt.Printf("ready pid=%d\n", os.Getpid())
	<-c
	fmt.Printf("terminated pid=%d\n", os.Getpid())
	return 0
}

// ttyPrompt is what the child of the "ttyhost" helper writes to /dev/tty.
const ttyPrompt = "agentproc-test-password: "

// helperTTYHost starts a command that prompts on /dev/tty, as ssh or sudo
// do, and reports how it ended. It runs with a terminal as its controlling
// terminal; the prompt must not reach that terminal.
func helperTTYHost() int {
	m := agentproc.New()
	defer m.Close()
	p, err := m.Start(context.Background(), agentproc.Request{Command: "printf '" + ttyPrompt + "' >/dev/tty && read answer </dev/tty"})
	if err != nil {
		fmt.Println("host: start:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := p.Wait(ctx)
	if err != nil {
		fmt.Println("host: wait:", err)
		return 1
	}
	// The output is quoted so that it cannot be mistaken for a prompt
	// written to the terminal directly.
	fmt.Printf("host: exit=%d output=%q\n", *info.ExitCode, p.Output().Text)
	return 0
}

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
		Env:     map[string]string{agentproc.HelperEnv: agentproc.UseHelper(mode)},
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

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
