package procfs

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// Scanner reads the per-process files of /proc. Single files are opened
// relative to rootDir; a listing of /proc takes a descriptor of its own (the
// listing moves its offset). Its buffer is reused for every file it reads,
// so a pass over thousands of processes allocates little. A Scanner is used
// by one goroutine at a time; make it with NewScanner and call Close.
//
// Reading /proc/PID/environ needs the same permission as ptrace-reading the
// process, so an unprivileged caller only ever sees its own processes.
type Scanner struct {
	proc  int    // rootDir: for openat of single files, never closed here
	list  int    // own descriptor of /proc for PIDs, opened on first use; -1 before
	buf   []byte // file contents, grown on demand
	dents []byte // getdents buffer
	names []string
	self  int
	euid  uint32
}

// NewScanner returns a Scanner, by value so that a caller can embed it
// without a second allocation.
func NewScanner() (Scanner, error) {
	fd, err := rootDir()
	if err != nil {
		return Scanner{}, err
	}
	// buf and dents are made on first use: the sweep after a short
	// command's exit usually probes a handful of PIDs and lists nothing.
	return Scanner{
		proc: fd,
		list: -1,
		self: os.Getpid(),
		euid: uint32(os.Geteuid()),
	}, nil
}

// Close closes the scanner's own listing descriptor, if it opened one.
func (s *Scanner) Close() {
	if s.list >= 0 {
		_ = unix.Close(s.list)
		s.list = -1
	}
}

// Sibling returns a Scanner for a worker goroutine, with buffers of its
// own; it is closed like any other.
func (s *Scanner) Sibling() *Scanner {
	return &Scanner{proc: s.proc, list: -1, self: s.self, euid: s.euid}
}

// Self is this process's PID, which PIDs leaves out.
func (s *Scanner) Self() int { return s.self }

// EUID is this process's effective user ID, to compare with the owner Read
// returns.
func (s *Scanner) EUID() uint32 { return s.euid }

// PIDs lists the thread-group IDs in /proc (threads are not listed at the
// top level), without our own.
func (s *Scanner) PIDs() ([]int, error) {
	if s.list < 0 {
		fd, err := unix.Open(Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, xerrors.Errorf("open /proc: %w", err)
		}
		s.list = fd
	} else if _, err := unix.Seek(s.list, 0, 0); err != nil {
		return nil, xerrors.Errorf("rewind /proc: %w", err)
	}
	if err := s.readDir(s.list); err != nil {
		return nil, xerrors.Errorf("read /proc: %w", err)
	}
	pids := make([]int, 0, len(s.names))
	for _, name := range s.names {
		if name == "" || name[0] < '1' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid == s.self {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// readDir lists the directory fd into s.names.
func (s *Scanner) readDir(fd int) error {
	s.names = s.names[:0]
	if s.dents == nil {
		s.dents = make([]byte, 32<<10)
	}
	for {
		n, err := unix.Getdents(fd, s.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		_, _, s.names = unix.ParseDirent(s.dents[:n], -1, s.names)
	}
}

// Read returns the contents of /proc/PID/name in the scanner's buffer
// (valid until the next read) and, if owner is set, the file's owner.
func (s *Scanner) Read(pid int, name string, owner bool) ([]byte, uint32, error) {
	fd, err := unix.Openat(s.proc, strconv.Itoa(pid)+"/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(fd)
	if len(s.buf) == 0 {
		s.buf = make([]byte, 16<<10)
	}
	n := 0
	for {
		if n == len(s.buf) {
			s.buf = append(s.buf, make([]byte, len(s.buf))...)
		}
		m, err := unix.Read(fd, s.buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	if !owner {
		return s.buf[:n], 0, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, err
	}
	return s.buf[:n], st.Uid, nil
}

// Stat returns the state and process group of pid (ParseStat).
func (s *Scanner) Stat(pid int) (state byte, pgrp int, ok bool) {
	data, _, err := s.Read(pid, "stat", false)
	if err != nil {
		return 0, 0, false
	}
	return ParseStat(data)
}

// MountNS returns the inode of pid's mount namespace, read from the link
// /proc/PID/ns/mnt ("mnt:[INODE]"; reading it needs leave to ptrace-read
// pid); ok is false when it cannot be read (gone, a zombie, not ours to
// inspect). Every namespace lives on the one nsfs, so the inode alone
// names it. A readlink, not a stat: a stat through the link makes the
// namespace's nsfs dentry, which took 2.5 times the marker pass's time.
//
// A thread group whose leader ended alone (SYS_exit on the main thread)
// runs on in its other threads behind a zombie leader, whose link reads
// nothing: then the first thread whose link reads names the namespace
// (TestAttackZombieLeaderHidesFromSweep). Only a failed read pays for it.
func (s *Scanner) MountNS(pid int) (ino uint64, ok bool) {
	var buf [64]byte
	n, err := unix.Readlinkat(s.proc, strconv.Itoa(pid)+"/ns/mnt", buf[:])
	if err == nil {
		return ParseNSLink(buf[:n], "mnt")
	}
	if !s.MultiThreaded(pid) {
		return 0, false
	}
	s.Tasks(pid, func(t Task) bool {
		n, err := unix.Readlinkat(t.dir, t.tid+"/ns/mnt", buf[:])
		if err == nil {
			ino, ok = ParseNSLink(buf[:n], "mnt")
		}
		return ok
	})
	return ino, ok
}

// PGrp returns the process group of pid.
func (s *Scanner) PGrp(pid int) (int, bool) {
	_, pgrp, ok := s.Stat(pid)
	return pgrp, ok
}

// StartTime returns the start time field of /proc/PID/stat
// (ParseStatStart), 0 if unknown.
func (s *Scanner) StartTime(pid int) uint64 {
	data, _, err := s.Read(pid, "stat", false)
	if err != nil {
		return 0
	}
	start, _, _ := ParseStatStart(data)
	return start
}

// FDLinks calls fn with the target of every /proc/PID/fd link of pid
// ("socket:[12345]", "/dev/null", ...), up to 64 bytes of it, which is
// enough for the kinds of file the callers look for. link is valid only
// during the call.
func (s *Scanner) FDLinks(pid int, fn func(link []byte)) {
	dir := strconv.Itoa(pid) + "/fd"
	fd, err := unix.Openat(s.proc, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), dir)
	names, err := f.Readdirnames(-1)
	_ = f.Close()
	if err != nil {
		return
	}
	var link [64]byte
	for _, name := range names {
		n, err := unix.Readlinkat(s.proc, dir+"/"+name, link[:])
		if err != nil {
			continue
		}
		fn(link[:n])
	}
}

// SocketInodes calls fn with the inode of every socket pid has open (from
// its fd links, see SocketInode).
func (s *Scanner) SocketInodes(pid int, fn func(inode uint64)) {
	s.FDLinks(pid, func(link []byte) {
		if inode, ok := SocketInode(link); ok {
			fn(inode)
		}
	})
}

// Tasks calls fn with each thread of pid, until fn returns true, and
// reports whether it did. The thread's files are opened relative to one
// descriptor of /proc/PID/task and read into reused buffers: the input
// watcher reads two or three files of every thread of every quiet process
// every few seconds, and paths from the root of /proc, each file's stat
// and a fresh buffer each were most of its cost.
func (s *Scanner) Tasks(pid int, fn func(t Task) bool) bool {
	dir, err := unix.Openat(s.proc, strconv.Itoa(pid)+"/task", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	if err := s.readDir(dir); err != nil {
		return false
	}
	for _, tid := range s.names {
		if tid == "" || tid[0] < '1' || tid[0] > '9' {
			continue
		}
		if fn(Task{s: s, dir: dir, tid: tid}) {
			return true
		}
	}
	return false
}

// MultiThreaded reports whether pid's thread group has more than one
// thread, from the link count of /proc/PID/task (two plus the threads):
// one stat, no file made and read. A zombie leader whose threads run on
// counts itself and them.
func (s *Scanner) MultiThreaded(pid int) bool {
	var st unix.Stat_t
	return unix.Fstatat(s.proc, strconv.Itoa(pid)+"/task", &st, 0) == nil && st.Nlink > 3
}

// OtherThread returns a thread of pid other than pid itself, if any: the
// one that still holds the thread group's memory and namespaces when its
// leader has ended alone and is a zombie.
func (s *Scanner) OtherThread(pid int) (tid int, ok bool) {
	self := strconv.Itoa(pid)
	s.Tasks(pid, func(t Task) bool {
		if t.tid == self {
			return false
		}
		tid, _ = strconv.Atoi(t.tid)
		return tid > 0
	})
	return tid, tid > 0
}

// Task is one thread during Scanner.Tasks, valid only in the call.
type Task struct {
	s   *Scanner
	dir int // /proc/PID/task
	tid string
}

// Read returns the contents of the thread's file name (a path under
// /proc/PID/task/TID) in the scanner's buffer, valid until the next read.
func (t Task) Read(name string) ([]byte, error) {
	return readAt(t.dir, t.tid+"/"+name, &t.s.buf, 1<<20)
}

// ReadInto is Read into buf instead, at most limit bytes.
func (t Task) ReadInto(name string, buf *[]byte, limit int) ([]byte, error) {
	return readAt(t.dir, t.tid+"/"+name, buf, limit)
}

// readAt reads the /proc file name relative to dir into *buf, growing it
// up to limit bytes, and returns the contents (truncated at limit).
func readAt(dir int, name string, buf *[]byte, limit int) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if len(*buf) == 0 {
		*buf = make([]byte, min(4<<10, limit))
	}
	n := 0
	for n < limit {
		if n == len(*buf) {
			*buf = append(*buf, make([]byte, min(len(*buf), limit-n))...)
		}
		m, err := unix.Read(fd, (*buf)[n:min(len(*buf), limit)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return (*buf)[:n], nil
}
