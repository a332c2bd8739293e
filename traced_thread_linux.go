package agentproc

import (
	"os"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// reapTracedThreads reaps the threads of the shell pid that asked the host
// to trace them (PTRACE_TRACEME from a thread other than the main one makes
// the host, the process's parent, that thread's tracer): such a thread,
// once it has exited, stays a zombie that only its tracer reaps, and the
// kernel reports the shell to its parent's wait only once all its threads
// are reaped, so the wait for the shell never returned and Stop and Close
// hung with it (eighth attack review, TestAttackTracedThreadHangsWait).
// It runs until waited is closed; callers start it before the wait.
//
// It acts on events, never on a timer. Nothing happens before the output
// has ended (the shell's descriptors are closed: it has exited, or a stop
// killed the group, or it closed them and runs on). Then, and after each
// SIGCHLD the host receives (subscribeSIGCHLD: the kernel sends one when a
// traced thread exits), it asks the kernel, without reaping, which exited
// child or tracee of the host the shell's process group holds (waitid
// P_PGID with WNOWAIT: a thread shares its process's group). None: nothing
// to do, as for a shell that runs on, or one whose exit is not yet
// reported. The shell: the wait returns now, the usual exit, which has cost
// a getpgid and a waitid and read nothing in /proc. Another: a traced
// thread is a zombie, and the shell's threads are listed (/proc/PID/task)
// and the host's exited tracees among them reaped. Neither the leader's
// exit while a thread holds it back nor a thread's exit is an event a
// pidfd reports before Linux 6.9, and a thread pidfd on a leader held
// back reports nothing either (measured on 6.18): SIGCHLD is the event.
func reapTracedThreads(pid int, outputEnded, waited <-chan struct{}) {
	select {
	case <-waited:
		return
	case <-outputEnded:
	}
	if h := tracedHook.Load(); h != nil {
		(*h)(pid, false)
	}
	// The usual exit is reported by now, and needs no subscription.
	if exitedInGroup(pid) == pid {
		return
	}
	// Subscribed before the next question: a thread that exits after it
	// is seen at the next signal.
	chld, unsubscribe := subscribeSIGCHLD()
	defer unsubscribe()
	for {
		switch exitedInGroup(pid) {
		case pid:
			return // the wait has its report
		case 0:
		default:
			reapTracedTIDs(pid)
		}
		select {
		case <-waited:
			return
		case <-chld:
		}
	}
}

// exitedInGroup returns an exited child or tracee of the host in the
// process group of the shell pid, which is pid itself once the shell is
// reported to the wait (or was reaped), or 0 when there is none; waitid's
// WNOWAIT leaves it to be waited for.
func exitedInGroup(pid int) int {
	pgid, err := unix.Getpgid(pid)
	if err != nil {
		return pid // reaped: nothing of it is left
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PGID, pgid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || info.Signo == 0 {
			return 0
		}
		return int(siginfoPID(&info))
	}
}

// tracedHook, when set (tests), is called with look false once the output
// of the shell pid has ended, and with look true at each look at its
// threads.
var tracedHook atomic.Pointer[func(pid int, look bool)]

// reapTracedTIDs reaps, without blocking, the exited traced threads of pid
// other than its main thread.
func reapTracedTIDs(pid int) {
	if h := tracedHook.Load(); h != nil {
		(*h)(pid, true)
	}
	tasks, err := os.ReadDir(procfs.PIDFile(pid, "task"))
	if err != nil {
		return
	}
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		var st unix.WaitStatus
		for {
			_, err := unix.Wait4(tid, &st, unix.WALL|unix.WNOHANG, nil)
			if err != unix.EINTR {
				break
			}
		}
	}
}

// siginfoPID returns si_pid of a siginfo filled by waitid: the first field
// of the union that follows si_signo, si_errno and si_code, aligned for a
// pointer (asm-generic/siginfo.h), which golang.org/x/sys leaves unnamed.
func siginfoPID(info *unix.Siginfo) int32 {
	align := unsafe.Alignof(uintptr(0))
	off := (3*unsafe.Sizeof(int32(0)) + align - 1) &^ (align - 1)
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), off))
}
