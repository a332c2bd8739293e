package agentproc

import (
	"context"
	"os"
	"sync/atomic"
	"testing"

	"cdr.dev/slog/v3"
)

type countingSink struct{ n atomic.Int32 }

func (s *countingSink) LogEntry(context.Context, slog.SinkEntry) { s.n.Add(1) }
func (s *countingSink) Sync()                                    {}

// A full disk turns logging off after one warning; later writes are no-ops.
func TestOutputLogFullDisk(t *testing.T) {
	t.Parallel()
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	var sink countingSink
	l := &outputLog{dir: &logDir{logger: slog.Make(&sink)}, path: "/dev/full", f: f}
	for range 3 {
		l.write([]byte("data"))
	}
	l.close()
	if got := sink.n.Load(); got != 1 {
		t.Errorf("warnings: got %d, want 1", got)
	}
	if l.f != nil {
		t.Errorf("file still open after the failure")
	}
}
