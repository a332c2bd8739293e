// Package inotifytest overflows an inotify instance's queue, for the
// tests of the library's inotify readers: each must treat an overflow as
// "everything changed".
package inotifytest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// Overflow makes more events than the kernel queues for ino, through an
// IN_ATTRIB watch on dir (a directory no reader of ino names): two files'
// modes changed in turn, since an event the same as the queue's last is
// merged into it. It skips the test where the queue is too long to fill
// quickly (fs.inotify.max_queued_events above 131,072).
func Overflow(t testing.TB, ino int, dir string) {
	t.Helper()
	if _, err := unix.InotifyAddWatch(ino, dir, unix.IN_ATTRIB); err != nil {
		t.Fatal(err)
	}
	limit, ok := procfs.SysInt("fs/inotify/max_queued_events")
	if !ok {
		limit = 16384 // the kernel's default
	}
	if limit > 1<<17 {
		t.Skipf("the inotify queue holds %d events: too many to overflow in a test", limit)
	}
	files := [2]string{filepath.Join(dir, "x"), filepath.Join(dir, "y")}
	for _, f := range files {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i <= limit+2; i++ {
		if err := unix.Chmod(files[i%2], 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
