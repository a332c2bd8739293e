package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"

	"github.com/agentproc/agentproc"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}

// helperEnv makes the test binary act as a predictable child process (the
// helper-process pattern of os/exec's tests) instead of running tests.
const helperEnv = "AGENTPROC_TEST_HELPER"

// runHelper is the child's main. Modes:
//   - "ready": print "ready" once the runtime's signal handling is set up,
//     then block until a signal ends the process.
//   - "pieces": write the pieces of helperPiecesEnv one by one, waiting for
//     a byte on the FIFO at helperFIFOEnv between two pieces (Unix only).
//   - "stream": write helperBytesEnv bytes of text in 64 KiB writes.
//   - "cat": copy stdin to stdout until EOF.
//   - "ticks": for each byte read from the FIFO at helperFIFOEnv, write one
//     line holding the wall clock in Unix nanoseconds.
//   - "term": print "ready pid=N" once SIGTERM is handled, then on SIGTERM
//     print "terminated pid=N" and exit 0.
//   - "ttyhost": act as an agent host running in a terminal (see
//     TestChildCannotTakeHostTerminal).
//   - "listen": listen on a TCP port of 127.0.0.1 chosen by the kernel,
//     print "port=N", and block until a signal ends the process.
func runHelper(mode string) int {
	switch mode {
	case "term":
		return helperTerm()
	case "ttyhost":
		return helperTTYHost()
	case "pieces":
		return helperPieces()
	case "stream":
		return helperStream()
	case "ticks":
		return helperTicks()
	case "cat":
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "listen":
		return helperListen()
	case "ready":
		fmt.Println("ready")
		time.Sleep(time.Hour) // a child waiting to be signalled, not synchronisation
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

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
	p, err := m.Start(agentproc.Request{Command: "printf '" + ttyPrompt + "' >/dev/tty && read answer </dev/tty"})
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

// testTimeout bounds every wait in these tests.
const testTimeout = 10 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newManager returns a Manager closed at the end of the test.
func newManager(t *testing.T, opts ...agentproc.Option) *agentproc.Manager {
	t.Helper()
	m := agentproc.New(opts...)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: got %v, want nil", err)
		}
	})
	return m
}

func mustStart(t *testing.T, s interface {
	Start(agentproc.Request) (*agentproc.Process, error)
}, req agentproc.Request,
) *agentproc.Process {
	t.Helper()
	p, err := s.Start(req)
	if err != nil {
		t.Fatalf("Start(%q): %v", req.Command, err)
	}
	return p
}

func mustWait(t *testing.T, p *agentproc.Process) agentproc.Info {
	t.Helper()
	info, err := p.Wait(testContext(t))
	if err != nil {
		t.Fatalf("Wait(%s): %v (info %+v)", p.ID(), err, info)
	}
	return info
}

func exitCode(info agentproc.Info) int {
	if info.ExitCode == nil {
		return -999
	}
	return *info.ExitCode
}

func TestStartForegroundAndBackground(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	for _, bg := range []bool{false, true} {
		p := mustStart(t, m, agentproc.Request{Command: "echo hello", Background: bg})
		info := mustWait(t, p)
		if got := exitCode(info); got != 0 {
			t.Errorf("background=%v: exit code got %d, want 0", bg, got)
		}
		if info.Background != bg {
			t.Errorf("Background got %v, want %v", info.Background, bg)
		}
		if info.Running || info.Reason != agentproc.ReasonExited || info.ExitedAt.IsZero() || info.PID <= 0 {
			t.Errorf("final info got %+v, want exited with reason %q", info, agentproc.ReasonExited)
		}
		out := p.Output()
		if got := strings.TrimSpace(out.Text); got != "hello" {
			t.Errorf("output got %q, want %q", got, "hello")
		}
		if out.Truncated != nil {
			t.Errorf("Truncated got %+v, want nil", out.Truncated)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	// os.CreateTemp and os.Remove rather than t.TempDir: Wine's unlinkat
	// cannot remove a non-empty directory tree, which fails TempDir's cleanup
	// in the Windows run.
	f, err := os.CreateTemp("", "agentproc-test-")
	if err != nil {
		t.Fatal(err)
	}
	file := f.Name()
	_ = f.Close()
	t.Cleanup(func() { _ = os.Remove(file) })
	missing := file + "-missing"
	tests := []struct {
		name    string
		req     agentproc.Request
		mention string
	}{
		{"empty", agentproc.Request{Command: ""}, "empty command"},
		{"whitespace", agentproc.Request{Command: " \t\n "}, "empty command"},
		{"nul", agentproc.Request{Command: "echo a\x00b"}, "NUL"},
		{"missing dir", agentproc.Request{Command: "echo", WorkDir: missing}, strconv.Quote(missing)},
		{"file as dir", agentproc.Request{Command: "echo", WorkDir: file}, "not a directory"},
		{"empty env key", agentproc.Request{Command: "echo", Env: map[string]string{"": "x"}}, "empty key"},
		{"env key with =", agentproc.Request{Command: "echo", Env: map[string]string{"A=B": "x"}}, `"A=B"`},
		{"env key with NUL", agentproc.Request{Command: "echo", Env: map[string]string{"A\x00": "x"}}, "NUL"},
		{"env value with NUL", agentproc.Request{Command: "echo", Env: map[string]string{"SECRET": "top\x00secret"}}, `"SECRET"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := m.Start(tt.req)
			if !errors.Is(err, agentproc.ErrInvalidRequest) {
				t.Fatalf("Start: got (%v, %v), want ErrInvalidRequest", p, err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error got %q, want it to mention %q", err, tt.mention)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q leaks an env value", err)
			}
		})
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List after invalid starts: got %d processes, want 0", len(got))
	}
}

func TestListEmpty(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	if got := m.List(); len(got) != 0 {
		t.Errorf("List: got %v, want empty", got)
	}
}

func TestGetUnknown(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	if _, err := m.Get("no-such-id"); !errors.Is(err, agentproc.ErrNotFound) {
		t.Errorf("Get: got %v, want ErrNotFound", err)
	}
}

func TestWaitExitedReturnsAtOnce(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "exit 42"})
	mustWait(t, p)
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Wait returned")
	}
	info, err := p.Wait(testContext(t))
	if err != nil || exitCode(info) != 42 {
		t.Errorf("second Wait: got (%d, %v), want (42, nil)", exitCode(info), err)
	}
}

func TestStartAfterClose(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(agentproc.Request{Command: "echo"}); !errors.Is(err, agentproc.ErrClosed) {
		t.Errorf("Start after Close: got %v, want ErrClosed", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
}

func TestRetentionByAge(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithRetention(5*time.Minute, 10))
	p := mustStart(t, m, agentproc.Request{Command: "echo"})
	mustWait(t, p)
	clk.Advance(5*time.Minute - time.Second)
	if _, err := m.Get(p.ID()); err != nil {
		t.Fatalf("Get before the retention age: got %v, want the process", err)
	}
	clk.Advance(time.Second)
	if _, err := m.Get(p.ID()); !errors.Is(err, agentproc.ErrNotFound) {
		t.Errorf("Get at the retention age: got %v, want ErrNotFound", err)
	}
	if got := len(m.List()); got != 0 {
		t.Errorf("List after retention: got %d entries, want 0", got)
	}
	// The dropped process stays usable for whoever holds it.
	if got := p.Info(); got.Running || got.ExitCode == nil {
		t.Errorf("dropped process Info: got %+v, want its final state", got)
	}
}

func TestRetentionByCount(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithRetention(time.Hour, 2))
	var ids []string
	for range 3 {
		p := mustStart(t, m, agentproc.Request{Command: "echo"})
		mustWait(t, p)
		ids = append(ids, p.ID())
		clk.Advance(time.Second)
	}
	if _, err := m.Get(ids[0]); !errors.Is(err, agentproc.ErrNotFound) {
		t.Errorf("oldest exited: got %v, want ErrNotFound", err)
	}
	for _, id := range ids[1:] {
		if _, err := m.Get(id); err != nil {
			t.Errorf("Get(%s): got %v, want kept", id, err)
		}
	}
}

func TestConcurrentStartsRace(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			p, err := m.Start(agentproc.Request{Command: "echo hi"})
			if err != nil {
				t.Errorf("Start: %v", err)
				return
			}
			_ = m.List()
			_ = p.Output()
			if _, err := p.Wait(testContext(t)); err != nil {
				t.Errorf("Wait: %v", err)
			}
		})
	}
	wg.Wait()
	if got := len(m.List()); got != 16 {
		t.Errorf("List: got %d, want 16", got)
	}
}
