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
	dir, err := unix.Open(procfs.SelfFile("fd"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(dir)
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
