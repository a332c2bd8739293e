package agentproc

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"cdr.dev/slog/v3"
)

// TestDrainOutputClosedMeanwhile checks that drainOutput does not report
// "pipe deadline unavailable" when the copier closed the pipe between its
// check of readerDone and the deadline call, a race the exit path runs
// into under load. os reports that close as poll's "use of closed file",
// which is not os.ErrClosed; the warning once fired for it (and made
// TestForeignProcInNamespace, which counts warnings, fail). The test makes
// the race's outcome certain: the pipe is closed before the call, and
// readerDone only once drainOutput is blocked on it.
func TestDrainOutputClosedMeanwhile(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	_ = r.Close() // the copier's close, before drainOutput sets its deadline
	var warns WarnSink
	s := &supervisor{p: &Process{m: &Manager{cfg: config{logger: slog.Make(&warns), pipeDrain: time.Second}}}}
	readerDone := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		s.drainOutput(r, readerDone, false)
	}()
	// readerDone closes only once drainOutput waits on it, so the
	// deadline call has been made on the closed pipe.
	waitBlockedIn(t, "(*supervisor).drainOutput")
	close(readerDone)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("drainOutput did not return after readerDone closed")
	}
	if got := warns.Messages(); len(got) != 0 {
		t.Errorf("warnings: got %q, want none for a pipe closed meanwhile", got)
	}
}

// waitBlockedIn waits, under a deadline, until a goroutine is blocked on a
// channel receive inside fn (as the goroutine dump names it).
func waitBlockedIn(t *testing.T, fn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[chan receive") && strings.Contains(g, fn) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no goroutine blocked in %s", fn)
		case <-tick.C:
		}
	}
}
