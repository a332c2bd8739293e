package agentproc

import (
	"math"
	"os"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// fileID identifies an open file by device and inode: the same for both
// ends of a pipe and for every descriptor of one terminal.
type fileID struct {
	dev, ino uint64
}

func stdinIdentity(f *os.File) fileID {
	if f == nil {
		return fileID{}
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)} // Dev is uint32 on mips
}

// readingStdin looks at every thread of the tree's processes in
// /proc/PID/task/TID/syscall, which names the system call a blocked thread
// is in and its arguments. A thread counts when it is in read, readv,
// pread64 or preadv on a descriptor that is in; in poll, ppoll, select or
// pselect6 waiting for in to become readable (the descriptor sets are read
// from its memory with process_vm_readv); or in epoll_wait, epoll_pwait or
// epoll_pwait2 on an epoll instance that watches in for input
// (input_epoll_linux.go). The tree is the leader and its descendants (from
// /proc/PID/task/TID/children) plus cgroup members.
//
// What it misses: a read submitted through io_uring (see docs/observing.md), an
// epoll instance that watches stdin only through another epoll instance, a
// descendant that double-forked away from the leader without WithCgroup,
// and processes this one may not trace (/proc/PID/syscall needs ptrace
// access: another user's setuid program).
func readingStdin(leader int, cgroup string, in fileID) bool {
	s, err := newProcScanner()
	if err != nil {
		return false
	}
	defer s.Close()
	look := stdinLook{in: in}
	// The tree is walked as it is read, each thread's children with its
	// system call, so a match (most often the leader's first thread) ends
	// the walk before the rest is listed.
	pids := []int{leader}
	for i := 0; i < len(pids) && i < maxTreeProcs; i++ {
		pid := pids[i]
		found := s.Tasks(pid, func(t procfs.Task) bool {
			if data, err := t.Read("syscall"); err == nil && look.blockedReading(pid, t, data) {
				return true
			}
			if data, err := t.Read("children"); err == nil {
				pids = appendPIDs(pids, data)
			}
			return false
		})
		if found {
			return true
		}
	}
	if cgroup == "" {
		return false
	}
	data, err := os.ReadFile(cgroup + "/cgroup.procs")
	if err != nil {
		return false
	}
	walked := make(map[int]bool, len(pids))
	for _, pid := range pids {
		walked[pid] = true
	}
	for _, pid := range appendPIDs(nil, data) {
		if walked[pid] {
			continue
		}
		if s.Tasks(pid, func(t procfs.Task) bool {
			data, err := t.Read("syscall")
			return err == nil && look.blockedReading(pid, t, data)
		}) {
			return true
		}
	}
	return false
}

// maxTreeProcs bounds the processes of a tree readingStdin walks.
const maxTreeProcs = 4096

// stdinLook is one readingStdin pass.
type stdinLook struct {
	in fileID
	// epolls are the epoll instances already read in this pass and found
	// not to watch in: threads of a process share their descriptor table
	// (one that unshares it is rare enough to be looked at as if it did
	// not), so a thread pool waiting on one instance costs one read.
	epolls []pidFD
	fdinfo []byte // buffer for epoll fdinfo files
}

type pidFD struct{ pid, fd int }

func unreadOutput(f *os.File) int {
	n := 0
	conn, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	// TIOCINQ is FIONREAD: unread bytes of a pipe or a terminal master.
	// Control keeps the descriptor from being closed (and reused) under the
	// ioctl while the supervisor closes the pipe at exit.
	_ = conn.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	})
	return n
}

// blockedReading decides from the contents of a task's syscall file
// (procfs.ParseSyscall): the system call the thread is blocked in and its
// arguments.
func (l *stdinLook) blockedReading(pid int, t procfs.Task, data []byte) bool {
	in := l.in
	nr, args, ok := procfs.ParseSyscall(data)
	if !ok {
		return false
	}
	switch {
	case nr == unix.SYS_READ || nr == unix.SYS_READV || nr == unix.SYS_PREAD64 || nr == unix.SYS_PREADV:
		return fdIs(pid, int(args[0]), in)
	case nr == unix.SYS_PPOLL || nr == sysPoll:
		return pollWaitsOn(pid, uintptr(args[0]), int(args[1]), in)
	case nr == unix.SYS_PSELECT6 || nr == sysSelect:
		return selectWaitsOn(pid, int(args[0]), uintptr(args[1]), in)
	case nr == unix.SYS_EPOLL_PWAIT || nr == unix.SYS_EPOLL_PWAIT2 || nr == sysEpollWait:
		if args[0] > math.MaxInt32 {
			return false // not a descriptor
		}
		ep := pidFD{pid, int(args[0])}
		if slices.Contains(l.epolls, ep) {
			return false
		}
		if l.epollWaitsOn(pid, t, ep.fd) {
			return true
		}
		l.epolls = append(l.epolls, ep)
	}
	return false
}

// fdIs reports whether pid's descriptor fd is the file in.
func fdIs(pid, fd int, in fileID) bool {
	dev, ino, ok := procfs.FDFile(pid, fd)
	return ok && dev == in.dev && ino == in.ino
}

// maxWatchedFDs bounds how much of a poll or select set is read.
const maxWatchedFDs = 1024

func pollWaitsOn(pid int, fds uintptr, nfds int, in fileID) bool {
	if nfds <= 0 || nfds > maxWatchedFDs || fds == 0 {
		return false
	}
	set := make([]unix.PollFd, nfds)
	if !readMemory(pid, fds, unsafe.Slice((*byte)(unsafe.Pointer(&set[0])), nfds*int(unsafe.Sizeof(set[0])))) {
		return false
	}
	for _, pfd := range set {
		if pfd.Events&unix.POLLIN != 0 && pfd.Fd >= 0 && fdIs(pid, int(pfd.Fd), in) {
			return true
		}
	}
	return false
}

func selectWaitsOn(pid, nfds int, readfds uintptr, in fileID) bool {
	if nfds <= 0 || nfds > maxWatchedFDs || readfds == 0 {
		return false
	}
	bits := make([]byte, (nfds+7)/8)
	if !readMemory(pid, readfds, bits) {
		return false
	}
	for fd := range nfds {
		if bits[fd/8]&(1<<(fd%8)) != 0 && fdIs(pid, fd, in) {
			return true
		}
	}
	return false
}

// readMemory copies len(buf) bytes at addr in pid's memory into buf.
func readMemory(pid int, addr uintptr, buf []byte) bool {
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: addr, Len: len(buf)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	return err == nil && n == len(buf)
}
