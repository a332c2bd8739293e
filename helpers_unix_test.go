//go:build unix

package agentproc_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

// alive reports whether pid is a live, non-zombie process.
func alive(pid int) bool {
	if runtime.GOOS == "linux" {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		i := bytes.LastIndexByte(data, ')')
		return i > 0 && i+2 < len(data) && data[i+2] != 'Z'
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
