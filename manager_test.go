package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testleak"
)

func TestMain(m *testing.M) {
	// Every helper mode is registered by now (in init functions), so a child
	// started with agentproc.HelperEnv runs its mode here and exits.
	agentproc.RunHelperIfAsked()
	run := testleak.Mark()
	code := m.Run()
	// Every child the tests started carries run in its environment; one
	// still alive now was left behind by a test, and fails the run.
	if leaks := testleak.Check(run, 5*time.Second); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, testleak.Report(leaks))
		testleak.Kill(run, leaks)
		code = 1
	}
	for _, report := range afterRun {
		if left := report(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "the run left %d cgroups it made:\n%s\n", len(left), strings.Join(left, "\n"))
			code = 1
		}
	}
	if code == 0 {
		if unused := agentproc.UnusedHelpers(); len(unused) > 0 {
			fmt.Fprintf(os.Stderr, "helper modes registered but used by no test: %v\n", unused)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// afterRun holds checks TestMain runs after the tests, each returning what
// the run left behind (platform files add them in init).
var afterRun []func() []string

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
	Start(context.Context, agentproc.Request) (*agentproc.Process, error)
}, req agentproc.Request,
) *agentproc.Process {
	t.Helper()
	p, err := s.Start(testContext(t), req)
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
			p, err := m.Start(t.Context(), tt.req)
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
	if _, err := m.Start(t.Context(), agentproc.Request{Command: "echo"}); !errors.Is(err, agentproc.ErrClosed) {
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
			p, err := m.Start(t.Context(), agentproc.Request{Command: "echo hi"})
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
