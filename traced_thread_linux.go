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
// killed the group, or it closed them and runs on). Then, and at each
// SIGCHLD the host receives after it (subscribeSIGCHLD: the kernel sends
// one when a traced thread exits), it asks the kernel, without reaping,
// which exited child or tracee of the host the shell's process group holds
// (waitid P_PGID with WNOWAIT: a thread shares its process's group). None:
// nothing to do, as for a shell that runs on, or one whose exit is not yet
// reported. The shell: the wait returns now, the usual exit, which has
// cost a getpgid and a waitid and read nothing in /proc. Another: a traced
// thread is a zombie, and reapTracedTIDs reaps it if it is a thread of the
// shell, or else lists the shell's threads.
//
// Asking from the Start instead (the third mend) freed a shell that
// exec'd after its traced thread had exited, which waits in the kernel
// (de_thread) for the reap with its output open, until its Timeout or a
// Stop (TestAttackTracedThreadThenExec, skipped as open). It made every
// running process ask at every SIGCHLD of the program: with 1,000 idle
// commands running, each short command's exit cost the host 2.0–2.5 ms
// more CPU (docs/measurements.md), a cost that grows with what runs, for
// a tree that only hangs itself; left out. Neither the leader's exit while
// a thread holds it back nor a thread's exit is an event a pidfd reports
// before Linux 6.9, and a thread pidfd on a leader held back reports
// nothing either (measured on 6.18): SIGCHLD is the event.
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
		switch named := exitedInGroup(pid); named {
		case pid:
			return // the wait has its report
		case 0:
		default:
			reapTracedTIDs(pid, named)
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

// tracedListedHook, when set (tests), is called with the thread IDs read
// from /proc/PID/task before any of them is asked about: the window in
// which a listed thread may exit and its ID be taken.
var tracedListedHook atomic.Pointer[func(pid int, tids []int)]

// reapTracedTIDs reaps, without blocking, the exited traced threads of pid
// other than its main thread. named is the exited ID the question
// (exitedInGroup) named, neither 0 nor pid.
//
// It reaps only an ID the kernel has just named as exited and unreaped
// (waitid WNOWAIT), and only once that ID is found to be a thread of pid:
// an unreaped zombie's ID cannot be handed to a new task, and pid's
// reaper is the only waiter that reaps its threads, so the ID checked is
// the ID reaped. A TID taken from the listing and waited for by number, as
// this did before, could by then name a new child of the host that had
// already exited (another Start's shell, after the thread exited and a PID
// wrap-around), whose status the host would then have taken from its own
// wait (tenth attack review, TestAttackTracedTIDReused). While the question
// names a thread of pid it is reaped and the question asked again. Where
// it names another ID (a zombie child of the host in the group that is not
// pid's thread: a CLONE_PARENT child, left to its own wait) a traced
// zombie may stand behind it, as waitid names one ID, so the threads are
// listed and each is asked about by its own ID, the same question first.
func reapTracedTIDs(pid, named int) {
	for named != 0 && named != pid && isThreadOf(pid, named) {
		if !reapExited(named) {
			return // not reaped after all: asking again would name it again
		}
		named = exitedInGroup(pid)
	}
	if named == 0 || named == pid {
		return
	}
	if h := tracedHook.Load(); h != nil {
		(*h)(pid, true)
	}
	tasks, err := os.ReadDir(procfs.PIDFile(pid, "task"))
	if err != nil {
		return
	}
	tids := make([]int, 0, len(tasks))
	for _, e := range tasks {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid != pid {
			tids = append(tids, tid)
		}
	}
	if h := tracedListedHook.Load(); h != nil {
		(*h)(pid, tids)
	}
	for _, tid := range tids {
		// Asked first, checked second: the other order is the race
		// above.
		if exitedID(tid) && isThreadOf(pid, tid) {
			reapExited(tid)
		}
	}
}

// isThreadOf reports whether tid is a thread of the process pid other
// than its main one: /proc/PID/task/TID is found only for a thread of
// pid's thread group, an exited traced thread included until it is
// reaped.
func isThreadOf(pid, tid int) bool {
	if tid == pid {
		return false
	}
	_, err := os.Lstat(procfs.PIDFile(pid, "task/"+strconv.Itoa(tid)))
	return err == nil
}

// exitedID reports whether id is an exited child or tracee of the host not
// yet reaped, leaving it so (WNOWAIT).
func exitedID(id int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, id, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		return err == nil && info.Signo != 0 && int(siginfoPID(&info)) == id
	}
}

// reapExited reaps id, which the caller found exited and a thread of the
// shell, without blocking, and reports whether it did.
func reapExited(id int) bool {
	var st unix.WaitStatus
	for {
		got, err := unix.Wait4(id, &st, unix.WALL|unix.WNOHANG, nil)
		if err != unix.EINTR {
			return err == nil && got == id
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
