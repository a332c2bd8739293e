package agentproc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// When the writer falls behind by maxLogBacklog, output is dropped from the
// log instead of blocking the reader, and the gap is marked in the file.
func TestOutputLogBacklogDropsAndMarks(t *testing.T) {
	t.Parallel()
	// A file beside the system temp dir, removed by name: under Wine (the
	// Windows run) t.TempDir's RemoveAll cannot delete a non-empty tree.
	f, err := os.CreateTemp("", "agentproc-backlog-*.log")
	if err != nil {
		t.Fatal(err)
	}
	path := f.Name()
	t.Cleanup(func() { _ = os.Remove(path) })
	// No writer goroutine yet: everything stays queued.
	l := &outputLog{dir: &logDir{fsBound: fsBound{bound: time.Minute}}, path: path, f: f, wake: make(chan struct{}, 1), done: make(chan struct{})}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	const chunks = maxLogBacklog/(64<<10) + 3
	for range chunks {
		l.enqueue(chunk)
	}
	l.enqueue([]byte("end\n")) // fits nowhere either: the backlog is full
	go l.run()
	l.finish()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kept := strings.Repeat("x", maxLogBacklog)
	marker := "\n[agentproc: 196612 bytes not logged: the disk fell behind]\n"
	if got := string(data); got != kept+marker {
		t.Errorf("log: got %d bytes ending %q, want %d kept bytes and the marker %q",
			len(got), got[max(0, len(got)-80):], maxLogBacklog, marker)
	}
}

// A call that outlives the bound makes the directory hung until it returns;
// then its undo runs and the directory is usable again.
func TestLogDirCallOverdue(t *testing.T) {
	t.Parallel()
	// open fails before it touches the path: no directory is made (and
	// none left for Wine's TempDir cleanup, which cannot remove one).
	d := &logDir{path: filepath.Join(os.TempDir(), "agentproc-never-created"), fsBound: fsBound{bound: 10 * time.Millisecond}}
	release := make(chan struct{})
	undone := make(chan struct{})
	if d.call(func() { <-release }, func() { close(undone) }) {
		t.Fatal("call: got true for a call blocked past the bound, want false")
	}
	if !d.hung() {
		t.Error("hung after an overdue call: got false, want true")
	}
	if _, err := d.open("x"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("open while hung: got %v, want os.ErrDeadlineExceeded at once", err)
	}
	close(release)
	select {
	case <-undone: // the late call's goroutine ran undo
	case <-time.After(10 * time.Second):
		t.Fatal("undo did not run after the call returned")
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.hung() { // overdue drops right after undo, in the same goroutine
		if time.Now().After(deadline) {
			t.Fatal("still hung after the overdue call returned")
		}
		runtime.Gosched()
	}
	if !d.call(func() {}, nil) {
		t.Error("call after recovery: got false, want true")
	}
}
