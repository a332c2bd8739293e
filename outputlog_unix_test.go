//go:build unix

package agentproc_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
)

// linesCommand prints n lines "line NNNNNN\n" (12 bytes each), one write each.
func linesCommand(n int) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf 'line %%06d\n' $i; i=$((i+1)); done`, n)
}

func wantLines(from, to int) string {
	var sb strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&sb, "line %06d\n", i)
	}
	return sb.String()
}

func readLog(t *testing.T, info agentproc.Info) string {
	t.Helper()
	data, err := os.ReadFile(info.LogPath)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	return string(data)
}

func TestOutputLogHoldsEverything(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "logs") // created on demand
	m := newManager(t, agentproc.WithOutputLimits(100, 100, 0), agentproc.WithOutputLog(dir, 0))
	p := mustStart(t, m, agentproc.Request{Command: linesCommand(20000)})
	info := mustWait(t, p)
	if want := filepath.Join(dir, p.ID()+".log"); info.LogPath != want {
		t.Errorf("LogPath: got %q, want %q", info.LogPath, want)
	}
	if got := readLog(t, info); got != wantLines(0, 20000) {
		t.Errorf("log: got %d bytes, want the %d bytes written", len(got), 20000*12)
	}
	st, err := os.Stat(info.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if mode := st.Mode().Perm(); mode != 0o600 {
		t.Errorf("log mode: got %v, want 0600", mode)
	}
}

func TestOutputLogCap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t, agentproc.WithOutputLog(dir, 1200))
	tests := []struct {
		name    string
		command string
		want    string
	}{
		{"fits", linesCommand(100), wantLines(0, 100)},
		{"many writes", linesCommand(1000), wantLines(0, 50) +
			"\n[agentproc: 11400 more bytes not logged; the log keeps the first 600]\n"},
		{"one write", `printf '%05000d' 0`, strings.Repeat("0", 600) +
			"\n[agentproc: 4400 more bytes not logged; the log keeps the first 600]\n"},
	}
	for _, tt := range tests {
		p := mustStart(t, m, agentproc.Request{Command: tt.command})
		if got := readLog(t, mustWait(t, p)); got != tt.want {
			t.Errorf("%s: log got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestOutputLogRemovedByRetention(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk), agentproc.WithRetention(time.Minute, 10),
		agentproc.WithOutputLog(t.TempDir(), 0))
	p := mustStart(t, m, agentproc.Request{Command: "echo hi"})
	info := mustWait(t, p)
	if got := readLog(t, info); got != "hi\n" {
		t.Fatalf("log: got %q, want hi", got)
	}
	clk.Advance(time.Minute)
	_ = m.List() // retention is applied on access, and queues the removal
	agentproc.WaitLogRemovals(m)
	if _, err := os.Stat(info.LogPath); !os.IsNotExist(err) {
		t.Errorf("log after retention drop: got %v, want it removed", err)
	}
}

func TestOutputLogRemovedByClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := agentproc.New(agentproc.WithOutputLog(dir, 0))
	exited := mustStart(t, m, agentproc.Request{Command: "echo done"})
	mustWait(t, exited)
	running := mustStart(t, m, agentproc.Request{Command: "echo up; exec sleep 1000"})
	if _, err := running.WaitOutput(testContext(t), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("log dir after Close: got %v (%v), want empty", entries, err)
	}
}

// A log that cannot be created fails Start with an error naming it, and the
// command does not run: the caller asked for its whole output.
func TestOutputLogUnwritableDir(t *testing.T) {
	t.Parallel()
	// A regular file where the dir should be: unusable even for root.
	tmp := t.TempDir()
	notDir := filepath.Join(tmp, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithOutputLog(notDir, 0))
	ran := filepath.Join(tmp, "ran")
	p, err := m.Start(t.Context(), agentproc.Request{Command: "touch " + ran})
	if err == nil {
		t.Fatalf("Start: got process %s, want an error", p.ID())
	}
	if !strings.Contains(err.Error(), notDir) {
		t.Errorf("Start error: got %q, want it to name %q", err, notDir)
	}
	if len(m.List()) != 0 {
		t.Errorf("List after the failed Start: got %+v, want nothing", m.List())
	}
	// Nothing was spawned, so nothing can create the file later either.
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("the command ran (stat %s: %v)", ran, err)
	}
}
