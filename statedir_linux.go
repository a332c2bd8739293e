package agentproc

import (
	"bytes"
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/procfs"
)

// The state dir's part of the OS contract (listed in platform.go); the
// orphan killer (stopOrphans, checkRecordPID) is in orphans_linux.go.

func stateSupported() error { return nil }

var (
	bootIDOnce sync.Once
	bootIDVal  string
)

// bootID is /proc/sys/kernel/random/boot_id: a new random value each boot,
// so a record from an earlier boot is never matched to a live process.
func bootID() string {
	bootIDOnce.Do(func() {
		bootIDVal = procfs.BootID()
	})
	return bootIDVal
}

func selfIdentity() (hostIdentity, error) {
	id, ok := identityOf(os.Getpid())
	if !ok {
		return hostIdentity{}, xerrors.New("agentproc: cannot read /proc/self/stat")
	}
	if id.Boot == "" {
		return hostIdentity{}, xerrors.New("agentproc: cannot read /proc/sys/kernel/random/boot_id")
	}
	return id, nil
}

// identityOf returns pid's start time (field 22 of /proc/PID/stat, clock
// ticks since boot) on the current boot; ok is false when pid is not a live
// process. A zombie counts as gone: it runs nothing and holds no files.
func identityOf(pid int) (hostIdentity, bool) {
	id, zombie, ok := statIdentity(pid)
	return id, ok && !zombie
}

// statIdentity is identityOf that also accepts a zombie (saying so): a
// child that already exited still has the start time it was given.
func statIdentity(pid int) (id hostIdentity, zombie, ok bool) {
	start, state, ok := procfs.StartTime(pid)
	if !ok {
		return hostIdentity{}, false, false
	}
	return hostIdentity{PID: pid, Start: start, Boot: bootID()}, state == 'Z', true
}

// lockStateDir takes an exclusive flock on the file lock in dirfd. flock
// locks belong to the open file, so a second Manager in the same process is
// refused too, and the kernel drops the lock when its holder dies: a dead
// Manager never keeps the dir.
func lockStateDir(dirfd int) (*os.File, error) {
	f, err := openAt(dirfd, "lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, xerrors.Errorf("open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := "another Manager"
		data := make([]byte, 32)
		if n, _ := f.ReadAt(data, 0); len(bytes.TrimSpace(data[:n])) > 0 {
			holder += " (host PID " + string(bytes.TrimSpace(data[:n])) + ")"
		}
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, xerrors.Errorf("held by %s, which is still running: %w", holder, err)
		}
		return nil, xerrors.Errorf("lock: %w", err)
	}
	return f, nil
}

// unlockStateDir gives the lock up and closes the file. The unlock comes
// first because a flock belongs to the open file, which a child forked at
// that moment by another goroutine shares until its exec closes it: closing
// our descriptor alone would leave the dir locked for that instant, and a
// Manager opened on it right after would be refused.
func unlockStateDir(f *os.File) {
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	_ = f.Close()
}
