package agentproc

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// procScanner finds processes by their environment in /proc. One scanner is
// used for one sweep; its buffer is reused for every file it reads, so a
// sweep over thousands of processes allocates little.
//
// Reading /proc/PID/environ needs the same permission as ptrace-reading the
// process, so an unprivileged caller only ever sees its own processes.
type procScanner struct {
	proc  int    // open directory fd of /proc
	buf   []byte // file contents, grown on demand
	dents []byte // getdents buffer
	names []string
	self  int
	euid  uint32
}

func newProcScanner() (*procScanner, error) {
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, xerrors.Errorf("open /proc: %w", err)
	}
	// buf and dents are made on first use: the sweep after a short
	// command's exit usually probes a handful of PIDs and lists nothing.
	return &procScanner{
		proc: fd,
		self: os.Getpid(),
		euid: uint32(os.Geteuid()),
	}, nil
}

func (s *procScanner) close() { _ = unix.Close(s.proc) }

// pids lists the thread-group IDs in /proc (threads are not listed at the
// top level), without our own.
func (s *procScanner) pids() ([]int, error) {
	if _, err := unix.Seek(s.proc, 0, 0); err != nil {
		return nil, xerrors.Errorf("rewind /proc: %w", err)
	}
	s.names = s.names[:0]
	if s.dents == nil {
		s.dents = make([]byte, 32<<10)
	}
	for {
		n, err := unix.Getdents(s.proc, s.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, xerrors.Errorf("read /proc: %w", err)
		}
		if n <= 0 {
			break
		}
		_, _, s.names = unix.ParseDirent(s.dents[:n], -1, s.names)
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

// read returns the contents of /proc/PID/name in the scanner's buffer (valid
// until the next read) and, if owner is set, the file's owner.
func (s *procScanner) read(pid int, name string, owner bool) ([]byte, uint32, error) {
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

// marked reports whether pid is a process of our user whose environment
// holds entry. The environment read is the one the process was exec'd with:
// a process that later unsets the variable in its own memory still matches,
// one that exec'd with a cleared environment does not.
//
// The owner of /proc/PID/environ is the process's effective user (root for
// a non-dumpable process, which an unprivileged caller cannot read anyway).
func (s *procScanner) marked(pid int, entry []byte) bool {
	env, uid, err := s.read(pid, "environ", true)
	return err == nil && uid == s.euid && hasEnvEntry(env, entry)
}

// mayBeMarked is marked without the owner check, for the scan: the owner
// is checked when a candidate is verified before any signal, and most
// processes never get that far.
func (s *procScanner) mayBeMarked(pid int, entry []byte) bool {
	env, _, err := s.read(pid, "environ", false)
	return err == nil && hasEnvEntry(env, entry)
}

// scanWorkersMin is the number of processes per worker below which a scan
// runs on one goroutine: opening /proc/PID/environ costs a few
// microseconds, so only large process tables gain from spreading it.
const scanWorkersMin = 256

// rangeProbeMax is the widest PID range candidatePIDs probes one by one
// instead of listing /proc.
const rangeProbeMax = 4096

// candidatePIDs returns the PIDs that can belong to descendants of leader,
// started at startedAt. Linux hands out PIDs in increasing order, wrapping
// at pid_max, so as long as fewer PIDs were handed out since the leader
// started than fit between it and pid_max, every descendant got a PID after
// the leader's and at most the namespace's last one
// (/proc/sys/kernel/ns_last_pid). When the leader is younger than
// wrapWindow that holds, and when the range is also narrow (the common case
// of a short command) probing it is far cheaper than listing and reading
// all of /proc: it keeps the sweep after every shell exit out of
// Start+Wait's cost. Otherwise every process is a candidate.
func (s *procScanner) candidatePIDs(leader int, startedAt time.Time) ([]int, error) {
	if leader > 0 && !startedAt.IsZero() && time.Since(startedAt) < wrapWindow() {
		if last, ok := s.lastPID(); ok && last >= leader && last-leader <= rangeProbeMax {
			pids := make([]int, 0, last-leader)
			for pid := leader + 1; pid <= last; pid++ {
				if pid != s.self {
					pids = append(pids, pid)
				}
			}
			return pids, nil
		}
	}
	return s.pids()
}

// maxForksPerCPU bounds how many processes or threads one CPU can create in
// a second. Real fork-and-exit loops reach a few tens of thousands; the
// bound is generous on purpose, since it only decides how long the cheap
// path of candidatePIDs may be taken.
const maxForksPerCPU = 100_000

// wrapWindow is how long after a leader's start its PID range cannot have
// wrapped: pid_max minus the reserved PIDs and the probe range, at
// maxForksPerCPU on every CPU. With pid_max 32768 on 2 CPUs it is about a
// quarter of a second; kernels scale pid_max with the CPU count, so it stays
// in the tens of milliseconds or more on large machines. It is real
// (monotonic) time on purpose: it bounds what the kernel can do, not what a
// caller's clock says.
var wrapWindow = sync.OnceValue(func() time.Duration {
	pidMax := 32768
	if data, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if v, err := strconv.Atoi(string(bytes.TrimSpace(data))); err == nil {
			pidMax = v
		}
	}
	spare := pidMax - 300 - rangeProbeMax
	if spare <= 0 {
		return 0
	}
	return time.Duration(float64(spare) / float64(runtime.NumCPU()*maxForksPerCPU) * float64(time.Second))
})

// lastPID returns the last PID allocated in this PID namespace. It reads
// through the scanner's /proc descriptor into a stack buffer: it runs after
// every command's exit, where os.ReadFile's allocations showed.
func (s *procScanner) lastPID() (int, bool) {
	fd, err := unix.Openat(s.proc, "sys/kernel/ns_last_pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var buf [24]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	return pid, err == nil
}

// markedPIDs returns every candidate process (see candidatePIDs; leader 0
// or a zero startedAt means all of /proc) that mayBeMarked accepts, and how many processes were
// looked at. Large sets are split across up to four goroutines, each with
// its own buffer.
func (s *procScanner) markedPIDs(entry []byte, leader int, startedAt time.Time) (found []int, scanned int, err error) {
	pids, err := s.candidatePIDs(leader, startedAt)
	if err != nil {
		return nil, 0, err
	}
	workers := min(runtime.GOMAXPROCS(0), 4, len(pids)/scanWorkersMin+1)
	if workers <= 1 {
		for _, pid := range pids {
			if s.mayBeMarked(pid, entry) {
				found = append(found, pid)
			}
		}
		return found, len(pids), nil
	}
	chunk := (len(pids) + workers - 1) / workers
	parts := make([][]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		part := pids[min(w*chunk, len(pids)):min((w+1)*chunk, len(pids))]
		sub := s
		if w > 0 {
			sub = &procScanner{proc: s.proc, buf: make([]byte, 16<<10), self: s.self, euid: s.euid}
		}
		wg.Go(func() {
			for _, pid := range part {
				if sub.mayBeMarked(pid, entry) {
					parts[w] = append(parts[w], pid)
				}
			}
		})
	}
	wg.Wait()
	for _, p := range parts {
		found = append(found, p...)
	}
	return found, len(pids), nil
}

// pgrp returns the process group of pid.
func (s *procScanner) pgrp(pid int) (int, bool) {
	data, _, err := s.read(pid, "stat", false)
	if err != nil {
		return 0, false
	}
	_, pgrp, ok := parseStat(data)
	return pgrp, ok
}

// hasEnvEntry reports whether env, a block of NUL-terminated NAME=value
// strings, holds entry as one whole string. A longer name that merely starts
// with the same bytes (AGENTPROC_ID_X=...) or a value with a common prefix
// does not match.
func hasEnvEntry(env, entry []byte) bool {
	for off := 0; off < len(env); {
		i := bytes.Index(env[off:], entry)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(entry)
		if (i == 0 || env[i-1] == 0) && (end == len(env) || env[end] == 0) {
			return true
		}
		off = i + 1
	}
	return false
}

// pidfdOpen returns a pidfd for pid, or -1 and no error where the kernel
// has no pidfds (before 5.3): the caller then falls back to plain kill.
func pidfdOpen(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		return fd, nil
	case err == unix.ENOSYS:
		return -1, nil
	default:
		return -1, err
	}
}

// signalTarget sends sig to the process named by fd (a pidfd), or by pid
// when fd is -1. A pidfd keeps naming the same process even after its PID is
// reused, so once the target was verified the signal cannot go astray.
func signalTarget(pid, fd int, sig unix.Signal) error {
	if fd >= 0 {
		return unix.PidfdSendSignal(fd, sig, nil, 0)
	}
	return unix.Kill(pid, sig)
}

// pidfdExited reports whether the process behind a pidfd has exited; a
// pidfd polls readable from then on.
func pidfdExited(fd int) bool {
	if fd < 0 {
		return false
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n > 0
}
