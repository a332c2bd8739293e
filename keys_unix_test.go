//go:build unix

package agentproc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
)

// sideEffect returns a command that appends one line to a new file, and a
// function counting the lines in it: how many times the command ran.
func sideEffect(t *testing.T, then string) (command string, runs func() int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "runs")
	return "echo run >> " + shellQuote(file) + "; " + then, func() int {
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(data), "run\n")
	}
}

func TestKeyAttachesToTheSameProcess(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	cmd, runs := sideEffect(t, "echo started; exec sleep 1000")
	req := agentproc.Request{Command: cmd, Key: "build-1", Env: map[string]string{"A": "1"}, Background: true}
	p := mustStart(t, m, req)
	if _, err := p.WaitMatch(testContext(t), regexp.MustCompile(`^started$`)); err != nil {
		t.Fatal(err)
	}
	// A retry after a lost reply, with its own copy of the request.
	retry := req
	retry.Env = map[string]string{"A": "1"}
	if got := mustStart(t, m, retry); got != p {
		t.Errorf("retry: got process %s, want %s", got.ID(), p.ID())
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
	// Still retained after exit: the retry gets the finished process.
	if got := mustStart(t, m, retry); got != p {
		t.Errorf("retry after exit: got process %s, want %s", got.ID(), p.ID())
	}
	if n := runs(); n != 1 {
		t.Errorf("command ran %d times, want 1", n)
	}
	if got := len(m.List()); got != 1 {
		t.Errorf("List: got %d processes, want 1", got)
	}
}

func TestKeyConflict(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	dir := t.TempDir()
	base := agentproc.Request{Command: "exec sleep 1000", Key: "k", WorkDir: dir, Env: map[string]string{"A": "1"}}
	p := mustStart(t, m, base)
	variants := map[string]func(r *agentproc.Request){
		"command":    func(r *agentproc.Request) { r.Command = "exec sleep 999" },
		"workdir":    func(r *agentproc.Request) { r.WorkDir = t.TempDir() },
		"env value":  func(r *agentproc.Request) { r.Env = map[string]string{"A": "2"} },
		"env key":    func(r *agentproc.Request) { r.Env = map[string]string{"A": "1", "B": "1"} },
		"no env":     func(r *agentproc.Request) { r.Env = nil },
		"background": func(r *agentproc.Request) { r.Background = true },
		"stdin":      func(r *agentproc.Request) { r.Stdin = true },
		"tty":        func(r *agentproc.Request) { r.TTY = &agentproc.TTYSize{Rows: 24, Cols: 80} },
	}
	for name, change := range variants {
		req := base
		change(&req)
		if got, err := m.Start(t.Context(), req); !errors.Is(err, agentproc.ErrKeyConflict) {
			t.Errorf("%s differs: got (%v, %v), want ErrKeyConflict", name, got, err)
		}
	}
	// Timeout says how long, not what: it does not conflict.
	same := base
	same.Timeout = time.Hour
	if got := mustStart(t, m, same); got != p {
		t.Errorf("same request with a timeout: got %s, want %s", got.ID(), p.ID())
	}
	// Keys are per owner.
	q := mustStart(t, m.Scope("alice"), base)
	if q == p {
		t.Errorf("another owner's Start with the same key got the same process")
	}
	for _, p := range []*agentproc.Process{p, q} {
		if _, err := p.Stop(testContext(t)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKeyConcurrentStartsSpawnOnce(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	cmd, runs := sideEffect(t, "true")
	req := agentproc.Request{Command: cmd, Key: "once"}
	const starters = 32
	procs := make([]*agentproc.Process, starters)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range procs {
		wg.Go(func() {
			<-start
			p, err := m.Start(t.Context(), req)
			if err != nil {
				t.Errorf("Start: %v", err)
			}
			procs[i] = p
		})
	}
	close(start)
	wg.Wait()
	for _, p := range procs {
		if p != procs[0] {
			t.Fatalf("concurrent Starts got different processes %v and %v", p, procs[0])
		}
	}
	mustWait(t, procs[0])
	if n := runs(); n != 1 {
		t.Errorf("command ran %d times, want 1", n)
	}
}

func TestKeyFreedByRetention(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithRetention(time.Minute, 10))
	p := mustStart(t, m, agentproc.Request{Command: "true", Key: "k"})
	mustWait(t, p)
	clk.Advance(time.Minute)
	// Free again: even a different command may take it.
	q := mustStart(t, m, agentproc.Request{Command: "exit 1", Key: "k"})
	if q == p {
		t.Fatalf("Start after retention got the dropped process")
	}
	if info := mustWait(t, q); exitCode(info) != 1 {
		t.Errorf("new process: exit code %d, want 1", exitCode(info))
	}
}

func TestKeyFreedWhenStartFails(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithMaxRunning(1))
	blocker := mustStart(t, m, agentproc.Request{Command: "exec sleep 1000"})
	req := agentproc.Request{Command: "echo hi", Key: "k"}
	if _, err := m.Start(t.Context(), req); !errors.Is(err, agentproc.ErrTooManyProcesses) {
		t.Fatalf("Start over the limit: got %v, want ErrTooManyProcesses", err)
	}
	if _, err := blocker.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
	p := mustStart(t, m, req)
	mustWait(t, p)
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
