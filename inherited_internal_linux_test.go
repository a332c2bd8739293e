package agentproc

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestHighestInheritableRescans: the scan keeps its descriptor of
// /proc/self/fd between calls (fdDir), and each call must still see the
// table as it is then: a descriptor without close-on-exec made after a
// scan is found by the next, and one closed is no longer. Not parallel: it
// reads this process's whole table.
func TestHighestInheritableRescans(t *testing.T) {
	const high = 900 // above anything a harness passes the test binary
	if _, err := highestInheritable(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.FcntlInt(0, unix.F_DUPFD, high) // without close-on-exec
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = unix.Close(fd)
		}
	}()
	if top, err := highestInheritable(); err != nil || top != fd {
		t.Errorf("after dup to %d: got %d (%v), want %d", fd, top, err, fd)
	}
	if top, err := highestInheritable(); err != nil || top != fd {
		t.Errorf("scanned again: got %d (%v), want %d", top, err, fd)
	}
	_ = unix.Close(fd)
	closed = true
	if top, err := highestInheritable(); err != nil || top >= fd {
		t.Errorf("after closing %d: got %d (%v), want below it", fd, top, err)
	}
}
