package agentproc

import (
	"errors"
	"io/fs"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/pidfd"
	"github.com/agentproc/agentproc/internal/procfs"
)

// treeCoreLimit is the RLIMIT_CORE, soft and hard, a sandboxed tree starts
// with. Not 0: where the kernel's core_pattern is a pipe (systemd-coredump,
// apport) it ignores the limit and a root helper writes the tree's memory
// outside Write; at exactly 1 it aborts a pipe dump (fs/coredump.c:
// coredump_pipe checks the limit against 1, the value it gives its own
// helpers against recursion), and a file dump below the format's minimum
// is not written (ELF's is a page), so no core leaves the tree either way.
// Not the socket route of Linux 6.16 and later (a core_pattern starting
// with @), which ignores the limit (docs/sandbox-threats.md).
// The tree cannot raise the hard limit: that takes CAP_SYS_RESOURCE, which
// the root path drops from its bounding set and the unprivileged path never
// has (TestSandboxNoCoreDump).
const treeCoreLimit = 1

// startNoCore starts cmd on the calling thread, which the sandbox has
// locked and confined, with the tree's RLIMIT_CORE at treeCoreLimit, and
// returns the tree held stopped until this thread is gone: the caller,
// on another thread, lets it go (treeHold.release). nil where nothing is
// held.
//
// Resource limits belong to the process, not the thread (signal_struct), so
// setting the limit on the forking thread would set the host's own, and
// os/exec has no hook between fork and exec but RLIMIT_NOFILE's restore.
// So the child is started traced (PTRACE_TRACEME before its execve, which
// stops it before the new program's first instruction), its limit set by
// the host from outside, and then let go: nothing of the tree has run with
// another limit. The confined thread's seccomp filter refuses prlimit on
// another process, so an unconfined thread of the host sets it; the detach
// must come from the tracer, this thread.
func startNoCore(cmd *exec.Cmd) (*treeHold, error) {
	if !traceAtExec() {
		return nil, cmd.Start() // the policy warns (noCoreLimitReason)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Ptrace = true
	defer func() { cmd.SysProcAttr.Ptrace = false }()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	hold, err := setTreeCoreLimit(pid)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = unix.PtraceDetach(pid)
		_ = cmd.Wait()
		return nil, err
	}
	if f := forkerLinger.Load(); f != nil {
		(*f)()
	}
	return hold, nil
}

// forkerLinger, when a test sets it, runs on the forking thread after the
// tree is let go (held or not) and before the thread goes on to its end:
// it widens the window the hold must cover from the microseconds of a
// thread's exit to what the test chooses, so that one Start proves the
// hold where 40 or 60 sampled the race (TestForkingThreadLingerHeld). nil
// in use.
var forkerLinger atomic.Pointer[func()]

// setTreeCoreLimit waits for the traced child pid to stop at its exec, sets
// its core limit from another thread and detaches it, held stopped
// (treeHold) where the kernel can tell this thread's end.
func setTreeCoreLimit(pid int) (*treeHold, error) {
	var ws unix.WaitStatus
	for {
		// WNOWAIT is not used with a stop: a stop is reported once, and
		// the exit that a kill makes is left for cmd.Wait.
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, xerrors.Errorf("wait for the tree's exec: %w", err)
		}
		break
	}
	if !ws.Stopped() {
		return nil, xerrors.Errorf("the tree did not stop at its exec: status %#x", uint32(ws))
	}
	done := make(chan error, 1)
	go func() {
		lim := unix.Rlimit{Cur: treeCoreLimit, Max: treeCoreLimit}
		done <- unix.Prlimit(pid, unix.RLIMIT_CORE, &lim, nil)
	}()
	if err := <-done; err != nil {
		return nil, xerrors.Errorf("set the tree's core limit: %w", err)
	}
	// The tree is held where the kernel can tell the thread's end, as
	// root too: the uid leaveTreeUID takes keeps kill and ptrace away,
	// but not a signal the kernel sends for a file's owner, which
	// sigio_perm allows an owner recorded with euid 0 to send to a thread
	// of any uid (TestAttackForkingThreadSIGIO). The uid is then the
	// fallback where no hold can be made (a kernel without thread
	// pidfds); any other failure to hold fails the Start
	// (TestAttackTreeHoldFailsOpen).
	hold, err := holdTree(pid)
	if err != nil {
		return nil, err
	}
	if hold == nil {
		leaveTreeUID()
	}
	// Signal 0: the SIGTRAP of the exec stop is not delivered. A SIGSTOP
	// that holdTree queued is taken next, before any instruction of the
	// tree.
	if err := unix.PtraceDetach(pid); err != nil {
		hold.close()
		return nil, xerrors.Errorf("let the tree go: %w", err)
	}
	return hold, nil
}

// treeHold is a tree's leader stopped by SIGSTOP until the thread that
// forked it has exited. That thread is in the tree's Landlock domain, and
// a domain's scope lets its processes signal (and, where no capability
// keeps them apart, trace) each other: between the detach and the
// thread's end, which takes it through the rest of the Start and the Go
// runtime's thread exit, the tree found it in /proc/$PPID/task and ended
// the host with tgkill(host, thread, SIGKILL) (eleventh attack review,
// TestAttackForkingThreadSignalled). Held, the tree runs no instruction
// before the thread is gone.
type treeHold struct {
	pid    int
	thread int // a pidfd of the forking thread (PIDFD_THREAD)
}

// forkerUID is the uid a root host's forking thread takes before it lets
// its tree go (leaveTreeUID): no account's, so that no process of the
// machine shares it.
const forkerUID = 0x7ffffffe

// leaveTreeUID makes the calling thread, which forked a tree and shares
// its Landlock domain, harder to reach from it where the tree cannot be
// held (treeHold: a kernel without thread pidfds): for a root host, the thread alone (setresuid(2) is per
// thread; the Go runtime's own Setuid changes every thread) takes
// forkerUID as its real, effective and saved uid. The tree, uid 0 with no
// capabilities, may then neither signal it (kill needs a uid in common or
// CAP_KILL) nor trace it or read its /proc files (a uid in common or
// CAP_SYS_PTRACE); the thread needs nothing of root's after the detach
// and exits, never going back to the runtime's pool. It reports whether
// it did: not for a host without root (it has no other uid to take: the
// tree is held), nor where the call fails (a user namespace that does not
// map forkerUID). The runtime's preemption signals to the thread are sent
// by its other threads, root with CAP_KILL. It does not close the window:
// a signal the kernel sends for a file the tree owns (F_SETOWN_EX naming
// the thread, F_SETSIG) is allowed to an owner recorded with euid 0 for
// a thread of any uid (sigio_perm), so it was not enough alone
// (TestAttackForkingThreadSIGIO). Changing the euid also makes the host's
// memory undumpable (commit_creds sets fs.suid_dumpable on the process's
// mm, shared by every thread), so the thread sets back what the host had:
// the tree may still not trace it, by the uid alone.
func leaveTreeUID() bool {
	if unix.Geteuid() != 0 {
		return false
	}
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, forkerUID, forkerUID, forkerUID); errno != 0 {
		return false
	}
	if dumpable == 1 {
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	}
	return true
}

// holdTree queues a SIGSTOP for the traced, stopped child pid and opens a
// pidfd of the calling thread that says when it exits. nil, and nothing
// queued, where the kernel has no thread pidfds (before Linux 6.9, which
// also predates Landlock's signal scope): the window stays open there.
// Any other failure is an error, and the Start fails: a pidfd that could
// not be had for want of a descriptor (EMFILE, a host near its limit) or
// memory let the tree run beside its forking thread unheld, as on an old
// kernel, with nothing said (twelfth attack review,
// TestAttackTreeHoldFailsOpen).
func holdTree(pid int) (*treeHold, error) {
	fd, err := openThreadPidfd(unix.Gettid())
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// EINVAL: PIDFD_THREAD is unknown (before 6.9); ENOSYS: no
		// pidfd_open at all (before 5.3).
		return nil, nil
	}
	if err != nil {
		return nil, xerrors.Errorf("open a pidfd of the thread that forked the tree, to hold the tree until it ends: %w", err)
	}
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		_ = unix.Close(fd)
		return nil, xerrors.Errorf("stop the tree until the thread that forked it ends: %w", err)
	}
	return &treeHold{pid: pid, thread: fd}, nil
}

// openThreadPidfd is pidfd.OpenThread; a test may replace it, before the
// Manager that uses it is made, to have it fail.
var openThreadPidfd = pidfd.OpenThread

// close drops h's pidfd; the tree stays as it is.
func (h *treeHold) close() {
	if h != nil {
		_ = unix.Close(h.thread)
	}
}

// treeHoldWaitMillis bounds the wait for the forking thread's end, in
// milliseconds: a thread exit is microseconds, a loaded machine's
// scheduler can make it more.
const treeHoldWaitMillis = 10_000

// release waits, on a thread other than the forking one, until that
// thread has exited, then continues the tree. Where it does not end in
// time the tree is killed and reaped and the Start fails: a tree let go
// beside its forking thread could reach the host.
func (h *treeHold) release(cmd *exec.Cmd) error {
	if h == nil {
		return nil
	}
	defer h.close()
	fds := []unix.PollFd{{Fd: int32(h.thread), Events: unix.POLLIN}}
	var err error
	for range 8 { // a signal may interrupt the wait (EINTR): a few more
		var n int
		n, err = unix.Poll(fds, treeHoldWaitMillis)
		if err == nil && n == 1 {
			if err = unix.Kill(h.pid, unix.SIGCONT); err == nil {
				return nil
			}
			break
		}
		if err == nil {
			err = unix.ETIMEDOUT
		}
		if err != unix.EINTR {
			break
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return xerrors.Errorf("let the tree go once the thread that started it ended: %w", err)
}

// traceAtExec reports whether a child may ask to be traced at its exec
// (PTRACE_TRACEME), which startNoCore needs. Yama refuses it at
// ptrace_scope 2 to a child without CAP_SYS_PTRACE (a sandboxed tree
// never has it) and at 3 to every child; without Yama it is allowed.
// There a Start would fail, so the tree starts without the core limit and
// its policy says so (noCoreLimitReason). Read once per process: a scope
// raised later fails the Starts after it. A test may replace it.
var traceAtExec = sync.OnceValue(func() bool {
	return yamaAllowsTraceMe(procfs.ReadSys("kernel/yama/ptrace_scope"))
})

// yamaAllowsTraceMe reads Yama's ptrace_scope: allowed without Yama, or at
// scope 0 or 1; refused at 2 and 3, and where the scope cannot be read.
func yamaAllowsTraceMe(scope []byte, err error) bool {
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	n, perr := strconv.Atoi(strings.TrimSpace(string(scope)))
	return err == nil && perr == nil && n < 2
}

// noCoreLimitReason is the policy's warning where traceAtExec is false.
const noCoreLimitReason = "core dumps are not stopped: Yama's ptrace_scope refuses PTRACE_TRACEME here, so the tree's RLIMIT_CORE cannot be set before it runs, and where core_pattern is a pipe (systemd-coredump, apport) a root helper writes a crashing tree's memory outside Write"
