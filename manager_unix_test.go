//go:build unix

package agentproc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
)

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

func TestMaxRunning(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithMaxRunning(1))
	p := mustStart(t, m, agentproc.Request{Command: "sleep 1000"})
	if _, err := m.Start(t.Context(), agentproc.Request{Command: "true"}); !errors.Is(err, agentproc.ErrTooManyProcesses) {
		t.Errorf("second Start: got %v, want ErrTooManyProcesses", err)
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
	q := mustStart(t, m, agentproc.Request{Command: "true"})
	mustWait(t, q)
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

// TestNoStdinReadsEOF checks that children started at the same time
// without Stdin all read end of file at once from the /dev/null they share.
func TestNoStdinReadsEOF(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	var ps []*agentproc.Process
	for range 8 {
		ps = append(ps, mustStart(t, m, agentproc.Request{Command: `cat; echo "eof $?"`}))
	}
	for _, p := range ps {
		mustWait(t, p)
		if got := p.Output().Text; got != "eof 0\n" {
			t.Errorf("%s printed %q, want %q", p.ID(), got, "eof 0\n")
		}
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLog(t.TempDir(), 0))
	alice := m.Scope("alice")
	running := mustStart(t, alice, agentproc.Request{Command: "sleep 1000"})
	exited := mustStart(t, alice, agentproc.Request{Command: "echo hi", Key: "k"})
	info := mustWait(t, exited)

	if err := alice.Remove(running.ID()); !errors.Is(err, agentproc.ErrRunning) {
		t.Errorf("Remove(running): got %v, want ErrRunning", err)
	}
	if _, err := alice.Get(running.ID()); err != nil {
		t.Errorf("Get after a refused Remove: got %v, want the process", err)
	}
	if err := m.Scope("bob").Remove(exited.ID()); !errors.Is(err, agentproc.ErrNotFound) {
		t.Errorf("another owner's Remove: got %v, want ErrNotFound", err)
	}
	if err := alice.Remove(exited.ID()); err != nil {
		t.Fatalf("Remove(exited): got %v, want nil", err)
	}
	if _, err := alice.Get(exited.ID()); !errors.Is(err, agentproc.ErrNotFound) {
		t.Errorf("Get after Remove: got %v, want ErrNotFound", err)
	}
	if got := alice.List(); len(got) != 1 || got[0].ID != running.ID() {
		t.Errorf("List after Remove: got %+v, want only the running process", got)
	}
	if err := alice.Remove(exited.ID()); !errors.Is(err, agentproc.ErrNotFound) {
		t.Errorf("second Remove: got %v, want ErrNotFound", err)
	}
	agentproc.WaitLogRemovals(m)
	if _, err := os.Stat(info.LogPath); !os.IsNotExist(err) {
		t.Errorf("log after Remove: got %v, want it removed", err)
	}
	// The handle stays readable, and its Key names a new process.
	if got := exited.Output().Text; got != "hi\n" {
		t.Errorf("removed process's output: got %q, want hi", got)
	}
	again, attached, err := alice.StartOrAttach(testContext(t), agentproc.Request{Command: "echo hi", Key: "k"})
	if err != nil || attached || again.ID() == exited.ID() {
		t.Errorf("keyed Start after Remove: got (%v, attached %v, %v), want a new process", again, attached, err)
	}
	if again != nil {
		mustWait(t, again)
	}
	if _, err := running.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(running.ID()); err != nil {
		t.Errorf("Remove after Stop: got %v, want nil", err)
	}
}
