package agentproc

import (
	"context"
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
	// the OS reports it: with a cgroup whose memory controller is on, the
	// whole tree's; otherwise the shell's and its waited-for children's. On
	// Linux without such a cgroup it is 0 (unknown) when it is no more than
	// the host's own high-water mark, since until exec the shell runs on
	// the host's memory and the kernel counts that as the shell's. On
	// Windows it is not resident memory: it is the largest peak commit
	// charge (private memory allocated, in RAM or paged out) of any one
	// process of the job, the closest figure Windows keeps per tree.
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
	// Redactions counts the secret values replaced in the output so far
	// (see WithSecrets). A detached process's runner reports its count
	// when the process exits; until then it reads 0.
	Redactions int
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
	// Sandbox says how the tree is confined (Request.Sandbox); nil when it
	// is not. What of the policy could not be enforced (BestEffort) is in
	// Warnings.
	Sandbox *Confinement
	// Denials are what the sandbox refused the tree, one entry per
	// distinct refusal with a Count (NetworkHosts: the proxy's refusals);
	// nil when nothing was refused.
	Denials []Denial
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
	// Process is the caller's handle: its identity, the pieces callers
	// read and write, and its guarded state. The life of the process (the
	// command, its tree, the exit, the stop ladder) belongs to its
	// supervisor (supervisor.go), and the Manager's bookkeeping of it (key,
	// retention order) to the Manager's registry, under Manager.mu.

	// Identity: set before the Process is shared, never reassigned.
	m     *Manager
	id    string
	owner string
	seq   uint64 // start order, for List
	// releaseSecrets lets the owner's set of started Env secrets go of
	// this process's (holdOwnerSecrets) at its exit; nil when it holds
	// none (recovered).
	releaseSecrets func()

	// What callers read and write; each synchronises itself.
	buf    *outputBuffer
	in     *stdinWriter // nil without Stdin or TTY
	events eventGate    // orders this process's events; see events.go
	// stdinWritten is set by WriteStdin for the input watcher.
	stdinWritten atomic.Bool

	// state is everything guarded by the process's lock.
	state handleState

	// sup runs the process's life; set before the Process is shared.
	sup *supervisor

	// redact is what redacts its output (redact.go); it also redacts
	// what else the tree puts in Info, its Denials. Set before the
	// Process is shared; zero: nothing to redact.
	redact redaction
}

// handleState is a process handle's guarded state: what Info reports, and
// what decides the reason of its exit. Everything in it is read and written
// under mu, and nothing is done under mu but reading and writing it (the
// lock rule in docs/architecture.md).
type handleState struct {
	mu         sync.Mutex
	info       Info
	stopReason ExitReason // why this package is ending it, "" if it is not
	signaled   bool       // a Signal went out to the tree at least once
	// inputSig tells WaitOutput about input detection.
	inputSig inputSignal
	// redactions is counted by the output's redaction stage (redact.go)
	// without the lock, and added to Info.Redactions.
	redactions atomic.Int64
}

// snapshot returns a copy of Info that shares nothing with st.
func (st *handleState) snapshot() Info {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.infoLocked()
}

func (st *handleState) infoLocked() Info {
	info := st.info
	info.Redactions += int(st.redactions.Load())
	if info.ExitCode != nil {
		code := *info.ExitCode
		info.ExitCode = &code
	}
	info.Warnings = slices.Clone(info.Warnings)
	info.Ports = slices.Clone(info.Ports)
	info.Sandbox = info.Sandbox.clone()
	info.Denials = slices.Clone(info.Denials)
	return info
}

// running reports whether the exit has not been published yet.
func (st *handleState) running() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.info.Running
}

// markSignaled notes that a Signal is going out to the tree. It runs under
// the OS handle's signal gate (lock order: signal gate, then st.mu).
func (st *handleState) markSignaled() {
	st.mu.Lock()
	st.signaled = true
	st.mu.Unlock()
}

// claimStop makes reason the cause of the exit unless another stop claimed
// it first. It runs under the OS handle's signal gate, like markSignaled.
func (st *handleState) claimStop(reason ExitReason) {
	st.mu.Lock()
	if st.stopReason == "" {
		st.stopReason = reason
	}
	st.mu.Unlock()
}

// stopping reports whether a stop ladder has claimed the exit.
func (st *handleState) stopping() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stopReason != ""
}

// cause returns what this package did to the process: the reason a stop
// claimed ("" when none did) and whether Signal reached it.
func (st *handleState) cause() (ExitReason, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stopReason, st.signaled
}

// publishExit sets the exit's fields of Info with set and marks the
// process exited, closing buf in the same critical section: a reader that
// sees EOF and then asks for Info is told the process has exited.
func (st *handleState) publishExit(buf *outputBuffer, set func(*Info)) {
	st.mu.Lock()
	defer st.mu.Unlock()
	set(&st.info)
	buf.closeWrite()
	st.info.Running = false
	st.info.Ports, st.info.AwaitingInput = nil, false // a gone tree listens and reads nothing
}

// setReady records that the check of Request.Ready passed.
func (st *handleState) setReady() {
	st.mu.Lock()
	st.info.Ready = true
	st.mu.Unlock()
}

// exitReason is why a process ended, from what this package did to it (a
// stop's claimed reason, a Signal) and what the exit showed (an OOM kill
// its cgroup counted, the name of the signal that ended it).
func exitReason(stopReason ExitReason, signaled, oom bool, sigName string) ExitReason {
	switch {
	case stopReason != "":
		return stopReason
	case oom:
		return ReasonOOM
	case sigName != "" && signaled:
		return ReasonKilled
	case sigName != "":
		return ReasonSignaled
	default:
		return ReasonExited
	}
}

// ID returns the process's unique ID.
func (p *Process) ID() string { return p.id }

// Info returns the current state of the process.
func (p *Process) Info() Info { return p.state.snapshot() }

// Output returns the process's state together with its retained output.
// With Plain, Text is terminal-clean text (see PlainText).
func (p *Process) Output(opts ...OutputOption) Output {
	o := outputOptionsOf(opts)
	// The exit path sets the final state only after the output reader has
	// finished, so holding the lock while rendering (memory only) means an
	// exited Info is always paired with final text.
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	text, trunc := p.buf.renderText(p.m.cfg.maxLineBytes, o.plain)
	return Output{Info: p.state.infoLocked(), Text: text, Truncated: trunc}
}

// Done returns a channel that is closed when the process has exited and its
// output is final.
func (p *Process) Done() <-chan struct{} { return p.sup.done }

// Wait blocks until the process exits and returns its final Info. If ctx ends
// first it returns the current Info and ctx.Err(); the process keeps running.
func (p *Process) Wait(ctx context.Context) (Info, error) {
	select {
	case <-p.sup.done:
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
	return p.sup.signal(sig)
}

// Stop ends the process tree: it sends terminate, waits up to the grace
// period for the process to exit, then kills the tree, and returns the final
// Info as soon as the process has exited. If ctx ends first, Stop kills the
// tree at once (so nothing is left half-stopped) and returns the current Info
// with ctx.Err(). Stopping an exited process returns its Info and no error.
func (p *Process) Stop(ctx context.Context) (Info, error) {
	return p.sup.stop(ctx, ReasonKilled, time.Now())
}

// exited reports whether the process has exited.
func (p *Process) exited() bool { return p.sup.exited() }

// newProcess makes the handle of a child spawn has started: sup holds what
// spawn took (command, tree, containment, record, log, sandbox) and gets
// its channels, its watchdog and its way back to the handle here; the
// Info is the process as it runs, with the sandbox's confinement and
// warnings when it has one.
func (m *Manager) newProcess(req Request, id, owner, command, dir string, seq uint64, warnings []string, cmd *exec.Cmd, st *stdio, sup *supervisor) *Process {
	sup.done = make(chan struct{})
	// escalated is made with the process so the ladder and the
	// supervisor never see it nil.
	sup.escalated = make(chan struct{})
	p := &Process{
		m:     m,
		id:    id,
		owner: owner,
		seq:   seq,
		buf:   m.newBuffer(),
		in:    st.in,
		sup:   sup,
		state: handleState{info: Info{
			ID:         id,
			Command:    command,
			WorkDir:    m.shownWorkDir(req, owner, dir),
			Owner:      owner,
			Background: req.Background,
			Warnings:   warnings,
			Stdin:      st.in != nil,
			TTY:        st.tty,
			Running:    true,
			PID:        cmd.Process.Pid,
			StartedAt:  m.cfg.clock.Now("agentproc", "start"),
			Timeout:    req.Timeout,
			LogPath:    sup.log.pathOrEmpty(),
		}},
	}
	sup.p = p
	sup.watchdog = m.newWatchdog(req)
	p.state.info.Limits, p.state.info.IdleTimeout, p.state.info.MaxOutput = req.Limits, sup.watchdog.idle, req.MaxOutput
	if sup.sbx != nil {
		p.state.info.Sandbox = sup.sbx.info
		p.state.info.Warnings = append(p.state.info.Warnings, sup.sbx.warnings...)
	}
	return p
}
