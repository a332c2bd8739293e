//go:build unix

package agentproc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cdr.dev/slog/v3"
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
	_ = m.List() // retention is applied on access
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

// warnings counts the entries logged at warning level.
type warnings struct {
	mu       sync.Mutex
	messages []string
}

func (w *warnings) LogEntry(_ context.Context, e slog.SinkEntry) {
	if e.Level == slog.LevelWarn {
		w.mu.Lock()
		w.messages = append(w.messages, e.Message)
		w.mu.Unlock()
	}
}
func (w *warnings) Sync() {}

func TestOutputLogUnwritableDir(t *testing.T) {
	t.Parallel()
	// A regular file where the dir should be: unusable even for root.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var w warnings
	m := newManager(t, agentproc.WithLogger(slog.Make(&w)), agentproc.WithOutputLog(notDir, 0))
	p := mustStart(t, m, agentproc.Request{Command: linesCommand(100)})
	info := mustWait(t, p)
	if info.LogPath != "" || exitCode(info) != 0 {
		t.Errorf("got LogPath %q exit %d, want no log and a normal exit", info.LogPath, exitCode(info))
	}
	if got := p.Output().Text; got != wantLines(0, 100) {
		t.Errorf("output without a log: got %d bytes, want 1200", len(got))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.messages) != 1 {
		t.Errorf("warnings: got %q, want exactly one", w.messages)
	}
}
