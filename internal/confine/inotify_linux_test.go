package confine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/inotifytest"
)

// TestReadInotify checks the one inotify reader: each event's mask, watch
// and name as the kernel gave them (a file, a directory, a name of the
// longest length), no overflow while the queue holds them, and, once the
// queue overflowed, an overflow reported and never passed as an event.
func TestReadInotify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ino := newInotify(t)
	wd, err := unix.InotifyAddWatch(ino, dir, unix.IN_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", 255)
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, long), 0o700); err != nil {
		t.Fatal(err)
	}
	type event struct {
		mask uint32
		wd   int32
		name string
	}
	var got []event
	overflow := ReadInotify(ino, func(mask uint32, wd int32, name string) {
		got = append(got, event{mask, wd, name})
	})
	want := []event{{unix.IN_CREATE, int32(wd), "file"}, {unix.IN_CREATE | unix.IN_ISDIR, int32(wd), long}}
	if overflow || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v (overflow %v), want %v without overflow", got, overflow, want)
	}
	if ReadInotify(ino, func(uint32, int32, string) { t.Error("an event from an empty queue") }) {
		t.Error("an empty queue: got an overflow")
	}

	inotifytest.Overflow(t, ino, dir)
	n := 0
	overflow = ReadInotify(ino, func(mask uint32, _ int32, _ string) {
		if mask&unix.IN_Q_OVERFLOW != 0 {
			t.Error("the overflow passed as an event")
		}
		n++
	})
	if !overflow {
		t.Errorf("got no overflow after more events than the queue holds (%d read), want one", n)
	}
}

// TestDirWatcherOverflow checks that a DirWatcher whose queue overflowed
// counts every watch as changed: the events lost may have been any
// watch's.
func TestDirWatcherOverflow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := &DirWatcher{}
	defer d.Close()
	a := NewMountWatch(MountSpec{Hide: []string{filepath.Join(dir, "a", "missing")}}, d)
	defer a.Close()
	b := NewMountWatch(MountSpec{Hide: []string{filepath.Join(dir, "missing")}}, d)
	defer b.Close()
	if a.dirs == nil || b.dirs == nil {
		t.Fatal("no inotify watch made")
	}
	d.read(false)
	if a.stale.Load() || b.stale.Load() {
		t.Fatal("nothing changed: got a watch stale")
	}
	// A watch of the DirWatcher's instance that no MountWatch holds: its
	// events fill the queue without naming any watched path.
	inotifytest.Overflow(t, d.ino, t.TempDir())
	d.read(false)
	if !a.stale.Load() || !b.stale.Load() {
		t.Errorf("after an overflow: got stale %v and %v, want both", a.stale.Load(), b.stale.Load())
	}
}

// newInotify makes a non-blocking inotify instance closed at the test's
// end.
func newInotify(t *testing.T) int {
	t.Helper()
	ino, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(ino) })
	return ino
}
