package agentproc

import (
	"os"
	"os/exec"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/procfs"
)

// closeInherited makes cmd's child close, before it runs anything, every
// descriptor the host holds without close-on-exec above its standard three
// and cmd.ExtraFiles: those the host inherited from its own parent (a
// socket-activated listener, a jobserver pipe, a descriptor a shell left
// open) or made so by hand, which exec would otherwise pass to the tree.
// A sandboxed tree gets 0-2 and what the Request names, nothing else.
//
// The child does the closing: os/exec's child closes descriptor 3+i for
// each nil ExtraFiles entry i, after moving the descriptors it still needs
// out of the way, so padding ExtraFiles with nil up to the highest such
// descriptor closes them in the child's copy of the table and leaves the
// host's alone. Marking them close-on-exec in the host instead would
// change what the host's other children get, and race with their starts.
//
// Go opens every descriptor close-on-exec, atomically or under
// syscall.ForkLock, so only raw system calls or C code on another thread
// can make one without between this scan and the fork; such a descriptor
// above the highest one seen passes (docs/sandbox-threats.md).
func closeInherited(cmd *exec.Cmd) error {
	top, err := highestInheritable()
	if err != nil {
		return xerrors.Errorf("list the host's descriptors: %w", err)
	}
	if n := top - 2; n > len(cmd.ExtraFiles) {
		// A copy: the caller's slice is not written.
		cmd.ExtraFiles = append(slices.Clip(cmd.ExtraFiles), make([]*os.File, n-len(cmd.ExtraFiles))...)
	}
	return nil
}

// highestInheritable returns the highest descriptor of this process above 2
// without close-on-exec, 2 if there is none.
func highestInheritable() (int, error) {
	dir, err := takeFdDir()
	if err != nil {
		return 0, err
	}
	top, err := scanFdDir(dir)
	if err != nil {
		_ = unix.Close(dir)
		return 0, err
	}
	giveFdDir(dir)
	return top, nil
}

// fdDir keeps one open descriptor of /proc/self/fd between scans: the
// open is a large share of a scan (docs/measurements.md), and a
// directory of procfs lists the table as it is at each read from the
// start, so a kept one rewound (scanFdDir) sees what a fresh one would.
// Concurrent scans open their own; one kept already, the new one is closed.
var fdDir = make(chan int, 1)

// takeFdDir returns the kept descriptor of /proc/self/fd, or a new one.
func takeFdDir() (int, error) {
	select {
	case dir := <-fdDir:
		return dir, nil
	default:
		return unix.Open(procfs.SelfFile("fd"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
}

// giveFdDir keeps dir for the next scan, or closes it if one is kept.
func giveFdDir(dir int) {
	select {
	case fdDir <- dir:
	default:
		_ = unix.Close(dir)
	}
}

// scanFdDir lists dir, a descriptor of /proc/self/fd, from its start.
func scanFdDir(dir int) (int, error) {
	if _, err := unix.Seek(dir, 0, 0); err != nil {
		return 0, err
	}
	top := 2
	var buf [4096]byte
	var names []string
	for {
		n, err := unix.ReadDirent(dir, buf[:])
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return top, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names[:0])
		for _, name := range names {
			fd, err := strconv.Atoi(name)
			if err != nil || fd <= top || fd == dir {
				continue
			}
			// A descriptor closed since the listing fails with EBADF:
			// nothing to pass.
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
				top = fd
			}
		}
	}
}
