package procfs

import (
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// Path is where /proc is mounted.
const Path = "/proc"

// SelfExe is this process's executable, for re-executing it: the path
// stays valid even when the file was replaced or removed since the start.
const SelfExe = Path + "/self/exe"

// PIDFile returns the path of /proc/PID/name.
func PIDFile(pid int, name string) string {
	return Path + "/" + strconv.Itoa(pid) + "/" + name
}

// SelfFile returns the path of /proc/self/name, this process's own file.
func SelfFile(name string) string { return Path + "/self/" + name }

// ThreadSelfFile returns the path of /proc/thread-self/name, the calling
// OS thread's own file (its namespaces, for instance).
func ThreadSelfFile(name string) string { return Path + "/thread-self/" + name }

// ReadSelf returns the contents of /proc/self/name.
func ReadSelf(name string) ([]byte, error) { return os.ReadFile(SelfFile(name)) }

// readSys returns the contents of /proc/sys/name ("kernel/pid_max").
func readSys(name string) ([]byte, error) { return os.ReadFile(Path + "/sys/" + name) }

// Foreign reports whether the /proc mounted here belongs to another PID
// namespace than ours: a process started with unshare --pid --fork and no
// remount of /proc sees the parent namespace's processes under numbers that
// mean something else here. /proc/self then names our PID in that other
// namespace, not os.Getpid(). Without /proc it reports false: nothing is
// read from it anyway, and every reader fails closed.
func Foreign() bool {
	self, err := os.Readlink(Path + "/self")
	if err != nil {
		return false
	}
	return self != strconv.Itoa(os.Getpid())
}

// rootFD is a descriptor of /proc opened once and kept for the life of the
// host process: the exit path of every command reads a file or two of
// /proc, and opening the directory each time would be a third of those
// calls. A failure is not kept, so a /proc mounted later is found.
var rootFD struct {
	mu   sync.Mutex
	fd   int
	open bool // a host with its stdin closed can get fd 0
}

// rootDir returns the shared descriptor of /proc, for openat of single
// files. It is never closed.
func rootDir() (int, error) {
	rootFD.mu.Lock()
	defer rootFD.mu.Unlock()
	if rootFD.open {
		return rootFD.fd, nil
	}
	fd, err := unix.Open(Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, xerrors.Errorf("open /proc: %w", err)
	}
	rootFD.fd, rootFD.open = fd, true
	return fd, nil
}
