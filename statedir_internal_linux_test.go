package agentproc

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestStateDirUnlockWithSharedFile checks that a Manager that gives its
// state dir up frees it at once even while another descriptor shares the
// lock's open file, as a child forked by another goroutine does until its
// exec closes it: a Manager opened on the dir right after must get it.
func TestStateDirUnlockWithSharedFile(t *testing.T) {
	t.Parallel()
	dir, err := openPrivateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(dir)
	f, err := lockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The forked child's copy.
	shared, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(shared)
	unlockStateDir(f)
	again, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock, with a shared descriptor still open: %v", err)
	}
	unlockStateDir(again)
}
