package procfs

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadAtLimit: a task file is read whole, and cut at the limit even
// into a buffer that an earlier read grew beyond it (maxFDInfo bounds an
// epoll fdinfo this way).
func TestReadAtLimit(t *testing.T) {
	t.Parallel()
	s, err := NewScanner()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runtime.LockOSThread() // keep this thread alive and ours while it is listed
	defer runtime.UnlockOSThread()
	tid := fmt.Sprint(unix.Gettid())
	var whole, cut []byte
	s.Tasks(os.Getpid(), func(task Task) bool {
		if task.tid != tid {
			return false
		}
		buf := make([]byte, 64<<10)
		if whole, err = task.ReadInto("status", &buf, 1<<20); err != nil {
			t.Fatal(err)
		}
		whole = bytes.Clone(whole)
		if cut, err = task.ReadInto("status", &buf, 10); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if len(whole) < 100 || !bytes.HasPrefix(whole, []byte("Name:")) {
		t.Fatalf("status of thread %s: got %q, want the whole file", tid, whole)
	}
	if string(cut) != string(whole[:10]) {
		t.Errorf("status cut at 10 bytes: got %q, want %q", cut, whole[:10])
	}
}
