package agentproc

import (
	"os"
	"strconv"
	"time"

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
// It starts once the output has ended (the shell's descriptors are
// closed: it has exited, or a stop killed the group) and looks a moment
// later, then again less often each time, until waited is closed. Every thread listed is the
// shell's while the shell is unreaped; only one that is a traced zombie
// is reported to the host's wait4.
func reapTracedThreads(pid int, outputEnded, waited <-chan struct{}) {
	select {
	case <-waited:
		return
	case <-outputEnded:
	}
	// The first look waits too: the wait usually returns right after the
	// output ends, and then nothing is read.
	delay := groupPoll
	for {
		t := time.NewTimer(delay) // real time: it orders reads of /proc
		select {
		case <-waited:
			t.Stop()
			return
		case <-t.C:
		}
		reapTracedTIDs(pid)
		delay = min(2*delay, time.Second)
	}
}

// reapTracedTIDs reaps, without blocking, the exited traced threads of pid
// other than its main thread.
func reapTracedTIDs(pid int) {
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
