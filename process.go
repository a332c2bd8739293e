package agentproc

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/xerrors"
)

// Signal names a signal in a portable way. On Unix they map to SIGINT,
// SIGTERM and SIGKILL; on Windows interrupt and terminate send
// CTRL_BREAK_EVENT to the process group and kill terminates the Job Object.
type Signal string

// The signals Process.Signal accepts.
const (
	SignalInterrupt Signal = "interrupt"
	SignalTerminate Signal = "terminate"
	SignalKill      Signal = "kill"
)

func (s Signal) valid() bool {
	switch s {
	case SignalInterrupt, SignalTerminate, SignalKill:
		return true
	}
	return false
}

// ExitReason says why a process ended.
type ExitReason string

// The reasons a process ends. The zero value "" means it is still running.
const (
	// ReasonExited: the process exited by itself (whatever its exit code),
	// including after a Signal it handled.
	ReasonExited ExitReason = "exited"
	// ReasonSignaled: a signal that did not come through this package ended it.
	ReasonSignaled ExitReason = "signaled"
	// ReasonKilled: Process.Signal or Process.Stop ended it.
	ReasonKilled ExitReason = "killed"
	// ReasonShutdown: Manager.Close ended it.
	ReasonShutdown ExitReason = "shutdown"
	// ReasonTimeout: Request.Timeout expired and the process was stopped.
	ReasonTimeout ExitReason = "timeout"
	// ReasonOrphaned: the Manager that started it died (see WithStateDir);
	// a later Manager on the same state dir stopped what was left of the
	// tree. ExitCode is -1: nobody was there to see the real one.
	ReasonOrphaned ExitReason = "orphaned"
	// ReasonOOM: the kernel's OOM killer ended a process of the tree, as
	// its cgroup counted (Linux with WithCgroup and the memory controller).
	// Info.MaxRSS is then the tree's peak memory where the kernel reports
	// it (memory.peak).
	ReasonOOM ExitReason = "oom"
	// ReasonIdle: Request.IdleTimeout passed without output and the process
	// was stopped.
	ReasonIdle ExitReason = "idle"
	// ReasonOutputLimit: the output passed Request.MaxOutput and the
	// process was stopped.
	ReasonOutputLimit ExitReason = "output_limit"
)

// Info describes a process at one moment. The zero values of the exit fields
// (ExitCode nil, Reason "", ExitedAt zero) mean the process is still running.
//
// Info, like Request and Output, has no JSON tags: it is the library's
// value, not a wire format. A server defines its own (httpapi.Process).
type Info struct {
	// ID is the process's unique ID (Process.ID).
	ID string
	// Command is what the shell runs: Request.Command, less a trailing "&"
	// that background detection removed.
	Command string
	// WorkDir is the directory the process started in.
	WorkDir string
	// Owner is the owner of the Scope that started it; "" for Manager.Start.
	Owner string
	// Background is Request.Background, or true when background detection
	// promoted the command.
	Background bool
	// Warnings holds what background detection found worth telling the
	// caller (see AnalyzeCommand); nil when nothing.
	Warnings []string
	// Running is true until the process has exited and its output is final.
	Running bool
	// PID is the shell's process ID (on Unix also its process group ID).
	PID int
	// ExitCode is nil while running; 128+N when signal N ended the process.
	// On Windows it is the shell's exit code as Windows reports it: 1 after
	// a job kill, 3221225786 (STATUS_CONTROL_C_EXIT) for a program the
	// default console handler ended on Ctrl+Break.
	ExitCode *int
	// ExitSignal is the operating system's name of the signal that ended
	// the process ("SIGKILL"), or "" when it exited by itself. Windows has
	// no signals; there it is "TerminateJobObject" when this package killed
	// the job while the shell ran, "CTRL_BREAK_EVENT" when the shell ended
	// with STATUS_CONTROL_C_EXIT. It is deliberately not a Signal: that
	// type names the three portable requests Process.Signal accepts, this
	// the OS's own vocabulary.
	ExitSignal string
	// Reason says why the process ended; "" while it runs.
	Reason ExitReason
	// StartedAt and ExitedAt are read from the Manager's clock; ExitedAt
	// is zero while the process runs.
	StartedAt time.Time
	ExitedAt  time.Time
	// CPUTime is user plus system time, known after exit.
	CPUTime time.Duration
	// MaxRSS is the peak resident set size in bytes, known after exit where
	// the OS reports it. On Windows it is not resident memory: it is the
	// largest peak commit charge (private memory allocated, in RAM or paged
	// out) of any one process of the job, the closest figure Windows keeps
	// per tree.
	MaxRSS int64
	// Leftovers counts the processes of the tree this package had to kill
	// beyond the shell's own exit or stop: members of its process group
	// still alive when the shell exited, plus, on Linux, every process
	// outside the group found on any stop path (Stop, Close, the cleanup
	// after the shell exited) because it carried the MarkerEnv marker or,
	// with WithCgroup, sat in the process's cgroup. Each process counts once.
	Leftovers int
	// Timeout is the Request's Timeout; 0 means none.
	Timeout time.Duration
	// Limits are the limits the tree runs under: the Request's merged with
	// the Manager's defaults.
	Limits Limits
	// IdleTimeout is the Request's IdleTimeout where it applies; 0 means none.
	IdleTimeout time.Duration
	// MaxOutput is the Request's MaxOutput; 0 means none.
	MaxOutput int64
	// LikelyOOM is true when the process ended by a SIGKILL (or its shell
	// exited with 137) that this package did not send while the kernel's
	// host-wide OOM kill counter (/proc/vmstat oom_kill) rose: probably the
	// OOM killer, but another process's OOM kill or another sender cannot be
	// ruled out. It is only set where the tree's own count is unknown
	// (without WithCgroup and its memory controller); where it is known,
	// Reason is ReasonOOM instead.
	LikelyOOM bool
	// LogPath is the file holding the full output (WithOutputLog), or ""
	// without one. The file is removed, in the background, once retention
	// drops the process, and by Close.
	LogPath string
	// Stdin is true when the caller can write the process's stdin
	// (Request.Stdin or Request.TTY).
	Stdin bool
	// TTY is true when the process runs under a pseudo-terminal.
	TTY bool
	// Detached is true for a Request.Detach process, which outlives the
	// Manager.
	Detached bool
	// Ports are the sockets the tree listened on at the latest scan (see
	// Process.Ports), rescanned at least once a second for Background
	// processes and while someone is in WaitPort; nil for other processes,
	// for exited ones and where Ports is unsupported.
	Ports []Port
	// AwaitingInput is true while a process of the tree is blocked reading
	// its stdin and the tree has written nothing for the quiet period (see
	// WithInputQuiet; Linux only, false elsewhere). WriteStdin clears it.
	AwaitingInput bool
	// Ready is true once the check of Request.Ready has passed.
	Ready bool
}

// Output is one consistent snapshot of a process's state and output: when
// Info says the process has exited, Text is final.
type Output struct {
	Info
	// Text is valid UTF-8: the whole output, or head, one marker line saying
	// how many bytes were omitted, and tail. Lines longer than the Manager's
	// maxLineBytes are cut with a visible suffix.
	Text string
	// Truncated is nil when Text is the whole output unchanged.
	Truncated *Truncation
}

// Process is one command started by a Manager. Its methods are safe for
// concurrent use. A Process stays usable after the Manager drops it by
// retention; it is then no longer found by Get or List.
type Process struct {
	// The fields fall in two groups. Those above mu are set before the
	// supervisor starts and never reassigned, or synchronise themselves
	// (the values they point to, sync.Once, atomics, the event gate); those
	// below are guarded by mu. The Manager's bookkeeping of a process (its
	// key, retention order) lives in the Manager's registry, under
	// Manager.mu, not here.
	m     *Manager
	id    string
	owner string
	seq   uint64 // start order, for List
	buf   *outputBuffer
	log   *outputLog // nil without WithOutputLog
	guard guard      // idle, output and OOM watch; immutable after Start
	in    *input     // nil without Stdin or TTY
	done  chan struct{}

	det    *detached // nil unless Request.Detach; see detach_linux.go
	events eventGate // orders this process's events; see events.go
	// stdinWritten is set by WriteStdin for the input watcher.
	stdinWritten atomic.Bool
	// readyDone is closed when the readiness check of Request.Ready has
	// ended; nil without one. Set before the supervisor starts.
	readyDone chan struct{}

	// supervisor is the part that runs the process's life (supervisor.go);
	// its fields are promoted, as p.sys, p.cmd and so on.
	supervisor

	mu         sync.Mutex
	info       Info
	stopReason ExitReason // why this package is ending it, "" if it is not
	signaled   bool       // Signal was called at least once
	// inputSig tells WaitOutput about input detection.
	inputSig inputSignal
}

// supervisor holds what only the life of one process uses: the command, its
// tree (process group or Job Object), what of it may escape, the state
// record, and the stop ladder's escalation. spawn (or adoption) sets it
// before the Process is shared, nothing reassigns it, and the values it
// points to synchronise themselves; the caller's handle, Process, reaches
// the OS only through it.
type supervisor struct {
	cmd *exec.Cmd
	sys *sysProc
	ctr *containment // what of the tree may leave the group
	rec *stateRecord // nil without WithStateDir
	// oomValue is the oom_score_adj spawn gave the leader, for the rest of
	// the tree (raiseOOMScoreTree); nil when none is raised.
	oomValue []byte
	// escalated is closed when the stop ladder moves from terminate to
	// kill (see escalate).
	escalated    chan struct{}
	escalateOnce sync.Once
}

// ID returns the process's unique ID.
func (p *Process) ID() string { return p.id }

// Info returns the current state of the process.
func (p *Process) Info() Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.infoLocked()
}

func (p *Process) infoLocked() Info {
	info := p.info
	if info.ExitCode != nil {
		code := *info.ExitCode
		info.ExitCode = &code
	}
	info.Warnings = slices.Clone(info.Warnings)
	info.Ports = slices.Clone(info.Ports)
	return info
}

// Output returns the process's state together with its retained output.
// With Plain, Text is terminal-clean text (see PlainText).
func (p *Process) Output(opts ...OutputOption) Output {
	o := outputOptionsOf(opts)
	// The exit path sets the final state only after the output reader has
	// finished, so holding p.mu while rendering means an exited Info is
	// always paired with final text.
	p.mu.Lock()
	defer p.mu.Unlock()
	text, trunc := p.buf.renderText(p.m.cfg.maxLineBytes, o.plain)
	return Output{Info: p.infoLocked(), Text: text, Truncated: trunc}
}

// Done returns a channel that is closed when the process has exited and its
// output is final.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the process exits and returns its final Info. If ctx ends
// first it returns the current Info and ctx.Err(); the process keeps running.
func (p *Process) Wait(ctx context.Context) (Info, error) {
	select {
	case <-p.done:
		return p.Info(), nil
	case <-ctx.Done():
		return p.Info(), ctx.Err()
	}
}

// Signal sends sig to the process group (Unix) or the Job Object (Windows:
// kill terminates the job; interrupt and terminate send CTRL_BREAK_EVENT to
// the console process group). Descendants that left the group (setsid) are
// not signalled here; Stop, Close and timeouts reach them too (see
// MarkerEnv). It returns ErrNotRunning once the process has exited
// (including when the signal races the exit) and ErrUnsupportedSignal for
// an unknown sig.
func (p *Process) Signal(sig Signal) error {
	if !sig.valid() {
		return xerrors.Errorf("signal %q: %w", string(sig), ErrUnsupportedSignal)
	}
	if p.det != nil {
		return p.signalDetached(sig)
	}
	if !p.running() {
		return ErrNotRunning
	}
	// The check and the signal are not one step, and need not be: the OS
	// handle's gate refuses a signal once the exit path has closed it,
	// which it does before publishing the exit, so a signal never targets
	// a recycled group. Whether this call ended the process is recorded
	// under the gate too, so that the exit path cannot miss it.
	return p.signalTree(sig, p.markSignaled)
}

// signalTree sends sig to the tree through the OS handle; sent runs under
// the handle's gate when the tree was there to signal (see sysProc.signal).
// It is called with no lock held.
func (p *Process) signalTree(sig Signal, sent func()) error {
	err := p.sys.signal(sig, sent)
	if errors.Is(err, errNoProcess) {
		return ErrNotRunning
	}
	if err != nil {
		return xerrors.Errorf("signal %s to process %s: %w", sig, p.id, err)
	}
	return nil
}

// running reports whether the exit has not been published yet.
func (p *Process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info.Running
}

// markSignaled notes that Signal reached the tree. It runs under the OS
// handle's gate (lock order: gate, then p.mu).
func (p *Process) markSignaled() {
	p.mu.Lock()
	p.signaled = true
	p.mu.Unlock()
}

// claimStop makes reason the cause of the exit unless another stop claimed
// it first. It runs under the OS handle's gate, like markSignaled.
func (p *Process) claimStop(reason ExitReason) {
	p.mu.Lock()
	if p.stopReason == "" {
		p.stopReason = reason
	}
	p.mu.Unlock()
}

// Stop ends the process tree: it sends terminate, waits up to the grace
// period for the process to exit, then kills the tree, and returns the final
// Info as soon as the process has exited. If ctx ends first, Stop kills the
// tree at once (so nothing is left half-stopped) and returns the current Info
// with ctx.Err(). Stopping an exited process returns its Info and no error.
func (p *Process) Stop(ctx context.Context) (Info, error) {
	return p.stop(ctx, ReasonKilled, time.Now())
}

// stop runs the stop ladder. since is the moment from which the processes
// that left the group are looked for (see containment.terminate): when the
// stop was asked for, or, for Close, when Close began. It is monotonic
// real time, not the Manager's clock: it orders reads of /proc.
func (p *Process) stop(ctx context.Context, reason ExitReason, since time.Time) (Info, error) {
	if p.det != nil {
		return p.stopDetached(ctx, reason)
	}
	if p.exited() {
		return p.Info(), nil
	}
	// Only a signal that reached a running process makes this package the
	// cause of the exit. A group that is gone, or holds only the zombie of
	// a shell not yet reaped, belongs to a shell that exited by itself and
	// whose output may still be draining: it keeps its own reason. alive
	// may read /proc, so it runs with no lock held (the lock rule); a
	// process that dies between the look and the signal is the same race as
	// one that dies just after the signal.
	live := p.sys.alive()
	if !p.running() {
		return p.Info(), nil
	}
	// The OS layer may treat a stop's terminate differently from one sent
	// by Signal (Windows: a batch file's prompt after the break).
	p.sys.beginStop()
	// The reason is claimed under the OS handle's gate just before the
	// signal goes out, so neither the supervisor that the signal wakes nor
	// the exit path, which closes the gate before it reads the reason, can
	// miss it; once the gate is closed nothing is claimed. SIGCONT follows
	// SIGTERM so that a stopped member acts on it within the grace.
	var claim func()
	if live {
		claim = func() { p.claimStop(reason) }
	}
	_ = p.signalTree(SignalTerminate, claim)
	p.sys.resume()
	// Then whatever left the group. The sweep reads /proc, and
	// it verifies every target itself, so it cannot reach a recycled PID
	// even if the process exits meanwhile.
	p.ctr.terminate(since)

	grace := p.m.cfg.clock.NewTimer(p.m.cfg.grace, "agentproc", "grace")
	defer grace.Stop()
	select {
	case <-p.done:
		return p.Info(), nil
	case <-grace.C:
	case <-ctx.Done():
		p.escalate()
		return p.Info(), ctx.Err()
	}
	p.escalate()
	select {
	case <-p.done:
		return p.Info(), nil
	case <-ctx.Done():
		return p.Info(), ctx.Err()
	}
}

// escalate is the kill step of the stop ladder: it tells a supervisor that
// is giving the group its grace period to stop waiting, and kills the tree.
func (p *Process) escalate() {
	p.escalateOnce.Do(func() { close(p.escalated) })
	p.killTree()
}

// killTree sends kill to the whole tree (the group on Unix, the job on
// Windows). Should that fail for another reason than the tree being gone,
// the shell is killed through its process handle, which names it even if
// its PID has been reused.
func (p *Process) killTree() {
	if err := p.sys.signal(SignalKill, nil); err != nil && !errors.Is(err, errNoProcess) {
		_ = p.cmd.Process.Kill()
	}
}

// exited reports whether the process has exited.
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
