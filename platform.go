package agentproc

import (
	"context"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// This file is the contract between the portable code and the operating
// system layer. Everything the portable files call that differs by OS is
// listed here, with what it must guarantee; each OS provides all of it under
// the same names, so a reader learns the whole OS surface from this comment
// and the compiler checks every build against the declarations below.
//
// Shell (sysproc_unix.go, sysproc_windows.go):
//   - defaultShell() is the shell WithShell replaces: sh -c, cmd.exe /d /s /c.
//   - newShellCmd(ctx, shell, command) builds shell... command without
//     starting it, the command as the last argument.
//   - checkShellCommand(shell, command) refuses, with ErrInvalidRequest, a
//     command the shell would silently run only in part.
//   - envKeyFold(k) is the form in which the OS compares environment names.
//   - envHasPWD says whether a child's environment names its directory in
//     PWD.
//
// Process tree (sysProc, made by newSysProc, in sysproc_unix.go and
// sysproc_windows.go; signal, resume, beginStop and exitStatus in
// signal_unix.go and signal_windows.go): one started shell and everything
// it starts, as a process group (Unix) or a Job Object (Windows).
//   - prepare(cmd, childAttrs) sets what must be in place before the child
//     runs, and is the one place that builds cmd.SysProcAttr from the
//     request (group or session, controlling terminal, cgroup; on Windows
//     the creation flags and cmd.exe's verbatim command line); started(cmd)
//     ties the tree to the child, and an error from it means the child could
//     not be contained and must be killed.
//   - signal(sig, sent) reaches every member of the tree, returns
//     errNoProcess when no member is left (never a raw ESRCH), and never
//     reaches a process outside the tree (a recycled group ID). It holds
//     the handle's signal gate, its own lock, across the send; the exit path
//     closes the signal gate (killLeftovers on Unix, release on Windows) before it
//     publishes the exit. sent, when not nil, runs under the signal gate just
//     before the send, once the signal gate is found open and the tree there, so
//     that what it records is seen by the exit and by the supervisor the
//     signal wakes.
//   - resume() follows a stop's terminate: SIGCONT, so that a stopped
//     member acts on SIGTERM within the grace (nothing on Windows).
//   - beginStop() is called just before a stop's terminate, for an OS that
//     treats it differently from a Signal (Windows: a batch file's
//     "Terminate batch job?" prompt).
//   - alive() reports whether any member still runs (zombies do not count
//     where the OS lets us tell).
//   - killLeftovers() kills what is left once the shell has been reaped and
//     counts it; afterwards signal returns errNoProcess.
//   - exitStatus(state) gives the exit code (128+N for signal N on Unix) and
//     the OS's name of what ended the process, for Info.ExitSignal.
//   - reapTraced(state) finishes the wait for a shell that stopped under its
//     parent's trace, which os/exec's wait returned at (Unix: killed and
//     reaped, and exitStatus says SIGKILL).
//   - usage(state) is CPU time and the leader's peak memory as the OS
//     reports it (ru_maxrss, a job's peak commit); treePeak(pid, rss) is
//     the tree's peak from it, asked only where the containment has none
//     (Linux: the exit records, else the leader's where it cannot be the
//     host's, peak_linux.go; elsewhere rss); release() frees OS handles.
//
// Escaped descendants (containment in containment_linux.go, with what it
// looks for in /proc in proc_linux.go, read through internal/procfs, and
// cgroups, v2 and v1, by the internal/cgroup package; the process group
// alone in
// containment_nonlinux.go): newContainment makes it, with the tree's
// cgroups when it has WithCgroup or limits, before the child starts;
// prepare hands sysProc.prepare the cgroup v2 to start in (startInCgroup
// writes it into the SysProcAttr sysProc.prepare builds, with a cgroup
// namespace rooted there where childAttrs.cgroupNS asks;
// cgroupEscapeWarning is a sandboxed Start's warning where that namespace
// is no boundary, or missing); startCommand
// runs cmd.Start, on a locked OS thread of its own with prepareThread's
// steps around it where the containment must place the starting thread
// (cgroup v1; startthread_linux.go); describe names the cgroup for a start
// error and cgroupDir gives its directory ("" without one); started
// follows the start (writing the v1 limits that wait until the thread has
// left) and reaped the leader's reaping;
// terminate(since) is the terminate step of a stop, looking for escapees in
// a /proc pass begun after since, which prepareStops takes once for all
// the stops of a Close; killEscaped is the kill after the shell exited;
// usage may replace the tree's usage with the cgroup's, and says whether
// its peak is the cgroup's (else sysProc.treePeak gives it); release frees it
// before the exit is published, and removeCgroups removes the cgroup after
// (Close waits for it).
// foreignProc reports a /proc of another PID namespace, which disables
// everything that reads it. Counting a group's live members is countGroup
// (proc_linux.go, group_darwin.go, group_freebsd.go, group_nocount.go) and
// groupLive (the same files), for sysProc on Unix only
// (checked in sysproc_unix.go, since this file builds on Windows too).
//
// Pipes (pipe_linux.go, pipe_nonlinux.go, pipe_windows.go):
// outputPipe and inputPipe make the pipes a child gets, with this process's
// end pollable so that deadlines and Close work on it (on Windows an
// overlapped named pipe). childStdin is the /dev/null a child without stdin
// gets, shared by all of them where that is kept open (Linux), else nil
// for os/exec's own. growPipe(f) enlarges the output pipe where the OS
// allows (pipe_linux.go; a no-op in pipe_nonlinux.go and on Windows).
// isBrokenPipe(err) recognises a write to a stdin whose reader is gone
// (signal_unix.go, signal_windows.go: EPIPE is SIGPIPE's error).
//
// Terminals (pty_unix.go, with ptyrelay_unix.go for macOS; pty_none.go on
// Windows and AIX): openPTY, ptyOutput, setTTYSize and veofChar implement
// Request.TTY; ttySupported() is nil where they do, else ErrUnsupported
// wrapped with the platform's name (validate checks it before anything is
// allocated), and without terminal support openPTY and setTTYSize return
// ErrUnsupported.
//
// Limits and the OOM score (limits_linux.go, limits_windows.go,
// limits_nonlinux.go; oom_linux.go, oom_nonlinux.go): checkLimits(l, cfg) refuses with
// ErrUnsupported a Limits the OS cannot enforce, before anything starts
// (on Linux newContainment does, when it plans the cgroups); applyLimits
// puts them on the tree before cmd.Start (a Job Object's limits; on Linux
// internal/cgroup has written them); oomScoreValue and raiseOOMScore (from the output
// reader, with awaitExitUnreaped holding the reap back until it is done)
// make the tree the kernel's first choice over the host;
// hostOOMKills and treeOOMKills read the OOM kill counters the exit's
// verdict compares (false where there are none).
//
// Observation (ports_linux.go, ports_windows.go, ports_nonlinux.go;
// input_linux.go, input_nonlinux.go), for Process.Ports and
// Info.AwaitingInput:
//   - portsSupported() is nil where listeningPorts works, else ErrUnsupported
//     wrapped with the platform's name.
//   - listeningPorts(cache, trees) gives the listening sockets of each tree,
//     sorted, from one pass over the system's processes. cache (a
//     portCache, whose zero value is empty) is what a poller keeps between
//     passes; it may be nil, and one cache is used by one goroutine at a
//     time.
//   - fileID identifies an open file across processes (device and inode on
//     Linux); its zero value identifies nothing. stdinIdentity(f) is that
//     of the child's end of its stdin, taken before the parent closes it
//     (zero for a nil f or where detection is unsupported).
//   - unreadOutput(f) is how many bytes wait in the output pipe or terminal
//     f for the reader to copy them (0 where unknown).
//   - readingStdin(leader, cgroup, in) reports whether a process of the tree
//     (the leader, its descendants and the cgroup's members) is blocked in
//     a system call reading in (false where unsupported).
//
// Usage (usage_linux.go, usage_other.go), for Process.Usage and
// Scope.Usage:
//   - usageSupported() is nil where treeUsages works, else ErrUnsupported
//     wrapped with the platform's name.
//   - treeUsages(procs) reads the current usage of each process's tree, in
//     one pass, without any lock held.
//
// State dir (statedir_linux.go, orphans_linux.go, hostguard_linux.go; statedir_nonlinux.go,
// where stateSupported and selfIdentity return ErrUnsupported):
// stateSupported says whether WithStateDir works; selfIdentity,
// identityOf and statIdentity give process identities that survive PID
// reuse (start time and boot ID; statIdentity also accepts a zombie);
// lockStateDir takes the dir's lock and unlockStateDir gives it up;
// openPrivateDir, openPrivateSubdir, openAt, readAt, unlinkAt, renameAt,
// listAt, removeAllAt and closeFD reach the dir and what it holds only
// through checked descriptors, never following a symlink
// (statedir_fs_linux.go; copyFileIn reads an output log the same way);
// checkRecordPID refuses a record's PID that cannot be a tree of ours;
// stopOrphans stops the trees of a dead Manager (orphanTree) and counts
// what it found; startHostGuard starts the
// host guard, whose add, remove and close keep its list of trees, and which
// kills them when the host dies (a nil *hostGuard does nothing).
//
// Detached processes (detach_linux.go, with the runner in
// detach_runner_linux.go; detach_nonlinux.go returns
// ErrUnsupported from detachSupported, startDetached and the supervisor's
// signalDetached and stopDetached): detachSupported, startDetached (a
// Request.Detach start, through a runner that outlives the Manager),
// adoptDetached (a record's live process for a new Manager), and the
// supervisor's superviseDetached, signalDetached, stopDetached and
// releaseDetached, which stand in for the child-process steps (their state
// is the type detached, empty where there is none).
//
// Sandbox (sandbox_linux.go with hosts_linux.go, over the mechanism in
// internal/confine; sandbox_darwin.go; sandbox_other.go on Windows and the
// BSDs; sandbox_run.go is the portable part that calls these):
//   - sandboxSupport() reports what this host can enforce
//     (SandboxSupport).
//   - sandboxCache, whose zero value is empty, keeps the built policies:
//     get(pol) builds a policy once and returns its *sandboxBuilt, with
//     info (what enforces it) and missing (what of the policy it cannot
//     enforce) filled in; close releases everything.
//   - sandboxBuilt's start(cmd, s) starts cmd confined (s.step, when not
//     nil, runs on the starting thread first; s.ready, when not nil, is the
//     thread takeReady handed the Start; s.tmp is the tree's temp dir, the
//     only one of the Manager's it may reach; s.hosts, when not nil, takes
//     over the proxy listener the thread made inside the network
//     namespace); done gives back a get's use of it.
//   - sandboxBuilt's ownCgroupNS() reports whether a tree started in its
//     cgroup v2 gets a cgroup namespace of its own rooted there, the
//     boundary that keeps its clone3(CLONE_INTO_CGROUP) inside
//     (containment_linux.go's startInCgroup makes it).
//   - sandboxBuilt's takeReady() hands a Start the thread confined ahead
//     for it, if any, with the temp dir that thread's view shows ("" for
//     none: the Start takes one from the pool); readyThread's discard
//     throws one away unused. sandboxCache's supplyTemps(parent, take,
//     give) names the Manager's temp parent (hidden from policies whose
//     trees have no temp dir in it) and says where such threads reserve
//     temp dirs and give back the unused.
//   - tempParentBase() is the directory a Manager makes its temp parent
//     in ("" for os.TempDir()).
//   - sandboxThreadUser() takes a use of the state the starting threads
//     share and returns its release.
//   - recycleTempDir(dir) moves a finished process's empty temp dir to a
//     new name for the next Start and returns where dir is now and whether
//     it may be reused (never, where the OS layer cannot check it safely).
//   - resolvePath(p) is the absolute path p names, resolved the way the
//     kernel resolves it at an open, the one place the sandbox resolves
//     paths (sandbox_resolve_unix.go; sandbox_resolve_windows.go, where
//     there is no sandbox, keeps Narrow's and InWrite's answers meaningful).
//   - hideWatch (a zero value ready, close to release) tells the policy
//     cache which resolved policies a link made in a hidden directory
//     since their walk has made stale: watch(key, dir) before the walk
//     reads dir, changed() at each Start (one read that finds nothing
//     when nothing changed), reset() when the cache starts over (the
//     watches let go), filled() once a watch was refused at the bound,
//     generation(), which moves whenever changed() drops a registration
//     or reset() drops them all (sandbox_hidewatch_linux.go; watching
//     nothing in
//     sandbox_hidewatch_other.go).
//   - moreConfined(pid) implements MoreConfined (sandbox_peer_linux.go;
//     ErrUnsupported in sandbox_peer_nonlinux.go).
//   - makeHostsListener() opens NetworkHosts' proxy listener inside the
//     tree's network namespace, on the starting thread (a ready thread
//     ahead of its Start), ready for the proxy to serve (hosts_linux.go;
//     never called in hosts_other.go).
//
// Every implementation obeys the package's lock rule and lock order, both
// written once in docs/architecture.md ("Locks"): the portable code calls
// all of these with no Manager or Process lock held, and the only lock an
// implementation holds across a system call is its own.

// childAttrs is what the portable code asks of a child's start, for
// sysProc.prepare to turn into cmd.SysProcAttr.
type childAttrs struct {
	tty      bool // stdin is a terminal slave, to become the controlling terminal
	cgroupFD int  // a cgroup v2 directory to start the leader in; -1 for none
	// cgroupNS starts the leader, with cgroupFD, in a cgroup namespace of
	// its own rooted at that cgroup (sandboxBuilt.ownCgroupNS).
	cgroupNS bool
	// peak is where the tree's exit records begin, for its peak memory
	// without a cgroup (Manager.peaks; Unix only, a no-op outside Linux).
	peak peakMark
}

// osTree is the method set sysProc has on every OS.
type osTree interface {
	prepare(cmd *exec.Cmd, a childAttrs) error
	started(cmd *exec.Cmd) error
	signal(sig Signal, sent func()) error
	resume()
	alive() bool
	killLeftovers() int
	beginStop()
	exitStatus(state *os.ProcessState) (code int, signal string)
	reapTraced(state *os.ProcessState)
	usage(state *os.ProcessState) (time.Duration, int64)
	treePeak(pid int, rss int64) int64
	release()
}

// escapeContainment is the method set containment has on every OS.
type escapeContainment interface {
	prepare() (cgroupFD int)
	describe() string
	cgroupDir() string
	started(cmd *exec.Cmd) error
	terminate(since time.Time)
	reaped()
	killEscaped() int
	usage(cpu time.Duration, rss int64) (time.Duration, int64, bool)
	release() error
	removeCgroups() (emptied bool)
}

// The declarations every OS must satisfy; a build for an OS that lacks one,
// or spells it differently, fails here rather than at a distant call site.
var (
	_ osTree            = (*sysProc)(nil)
	_ escapeContainment = (*containment)(nil)

	_ func() []string                                                         = defaultShell
	_ func(context.Context, []string, string) *exec.Cmd                       = newShellCmd
	_ func([]string, string) error                                            = checkShellCommand
	_ func(string) string                                                     = envKeyFold
	_ bool                                                                    = envHasPWD
	_ func(*os.File)                                                          = growPipe
	_ func() (*os.File, *os.File, error)                                      = outputPipe
	_ func() (*os.File, *os.File, error)                                      = inputPipe
	_ func() *os.File                                                         = childStdin
	_ func(*os.File) (*os.File, error)                                        = ptyOutput
	_ func(error) bool                                                        = isBrokenPipe
	_ func() error                                                            = ttySupported
	_ func(TTYSize) (*os.File, *os.File, error)                               = openPTY
	_ func(*os.File, TTYSize) error                                           = setTTYSize
	_ func(*os.File) byte                                                     = veofChar
	_ func(string, *config, Limits, *cgroupSetClaim) (*containment, error)    = newContainment
	_ func(*cgroupSetPool, string, *config, Limits) (string, *cgroupSetClaim) = (*cgroupSetPool).take
	_ func(*cgroupSetPool)                                                    = (*cgroupSetPool).close
	_ func(*cgroupSetPool, *hostGuard)                                        = (*cgroupSetPool).setGuard
	_ func(*cgroupSetClaim)                                                   = (*cgroupSetClaim).discard
	_ func(*exec.Cmd, *containment, *sandboxRun) error                        = startCommand
	_ func(*config) *sysProc                                                  = newSysProc
	_ func(*config, time.Time)                                                = prepareStops
	_ func() bool                                                             = foreignProc
	_ func(Limits, *config) error                                             = checkLimits
	_ func(Limits, *sysProc, *containment) error                              = applyLimits
	_ func() (uint64, bool)                                                   = hostOOMKills
	_ func() error                                                            = portsSupported
	_ func(*portCache, []portTree) ([][]Port, error)                          = listeningPorts
	_ func(*os.File) fileID                                                   = stdinIdentity
	_ func(*os.File) int                                                      = unreadOutput
	_ func(int, string, fileID) bool                                          = readingStdin
	_ func() error                                                            = usageSupported
	_ func([]*Process) ([]Usage, error)                                       = treeUsages
	_ func() (hostIdentity, error)                                            = selfIdentity
	_ func(int) (hostIdentity, bool)                                          = identityOf
	_ func(int) (*os.File, error)                                             = lockStateDir
	_ func(string) (int, error)                                               = openPrivateDir
	_ func(int, string, string) (int, error)                                  = openPrivateSubdir
	_ func(int, string, int, uint32) (*os.File, error)                        = openAt
	_ func(int, string, int64) ([]byte, error)                                = readAt
	_ func(int, string) error                                                 = unlinkAt
	_ func(int, string, string) error                                         = renameAt
	_ func(int) ([]string, error)                                             = listAt
	_ func(int, string) error                                                 = removeAllAt
	_ func(int)                                                               = closeFD
	_ func(string, string, io.Writer) error                                   = copyFileIn
	_ func(string, int) error                                                 = checkRecordPID
	_ func(*os.File)                                                          = unlockStateDir
	_ func(func(error)) (*hostGuard, error)                                   = startHostGuard
	_ func(*containment) (int64, bool)                                        = treeOOMKills
	_ func(*Manager) []byte                                                   = (*Manager).oomScoreValue
	_ func(*Manager, int, *containment, []byte)                               = (*Manager).raiseOOMScore
	_ func(int)                                                               = awaitExitUnreaped
	_ func(*syscall.SysProcAttr, int, bool) error                             = startInCgroup
	_ func(bool) string                                                       = cgroupEscapeWarning
	_ func() error                                                            = stateSupported
	_ func(int) (hostIdentity, bool, bool)                                    = statIdentity
	_ func([]orphanTree, time.Duration) []int                                 = stopOrphans
	_ func(*hostGuard, string, hostIdentity, string)                          = (*hostGuard).add
	_ func(*hostGuard, string)                                                = (*hostGuard).remove
	_ func(*hostGuard)                                                        = (*hostGuard).close
	_ func() error                                                            = detachSupported
	_ func(*Manager, *stateRecord) *Process                                   = (*Manager).adoptDetached
	_ func(*supervisor)                                                       = (*supervisor).superviseDetached
	_ func(*supervisor, Signal) error                                         = (*supervisor).signalDetached
	_ func(*supervisor, context.Context, ExitReason) (Info, error)            = (*supervisor).stopDetached
	_ func(*supervisor)                                                       = (*supervisor).releaseDetached

	_ func() SandboxFeatures                                            = sandboxSupport
	_ func(*sandboxCache, *sandboxPolicy) (*sandboxBuilt, error)        = (*sandboxCache).get
	_ func(*sandboxCache)                                               = (*sandboxCache).close
	_ func(*sandboxBuilt, *exec.Cmd, sandboxStart) error                = (*sandboxBuilt).start
	_ func(*sandboxBuilt) (*readyThread, string)                        = (*sandboxBuilt).takeReady
	_ func(*sandboxBuilt) bool                                          = (*sandboxBuilt).ownCgroupNS
	_ func(*readyThread)                                                = (*readyThread).discard
	_ func(*sandboxCache, string, func() (string, error), func(string)) = (*sandboxCache).supplyTemps
	_ func(*sandboxBuilt)                                               = (*sandboxBuilt).done
	_ func() string                                                     = tempParentBase
	_ func() func()                                                     = sandboxThreadUser
	_ func(string) (string, bool)                                       = recycleTempDir
	_ func(string) string                                               = resolvePath
	_ func(*hideWatch, string, string) bool                             = (*hideWatch).watch
	_ func(*hideWatch) ([]string, bool)                                 = (*hideWatch).changed
	_ func(*hideWatch)                                                  = (*hideWatch).reset
	_ func(*hideWatch) bool                                             = (*hideWatch).filled
	_ func(*hideWatch) uint64                                           = (*hideWatch).generation
	_ func(*hideWatch)                                                  = (*hideWatch).close
	_ func(int) (string, error)                                         = moreConfined
	_ func() (hostsListener, error)                                     = makeHostsListener

	_ func(*Manager, Request, string, string, string, uint64, []string) (*Process, error) = (*Manager).startDetached
)
