package agentproc

import (
	"context"
	"errors"
	"os"
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
type Info struct {
	ID         string `json:"id"`
	Command    string `json:"command"`
	WorkDir    string `json:"workdir"`
	Owner      string `json:"owner,omitempty"`
	Background bool   `json:"background"`
	// Warnings holds what background detection found worth telling the
	// caller (see AnalyzeCommand); nil when nothing.
	Warnings []string `json:"warnings,omitempty"`
	Running  bool     `json:"running"`
	PID      int      `json:"pid"`
	// ExitCode is nil while running; 128+N when signal N ended the process.
	// On Windows it is the shell's exit code as Windows reports it: 1 after
	// a job kill, 3221225786 (STATUS_CONTROL_C_EXIT) for a program the
	// default console handler ended on Ctrl+Break.
	ExitCode *int `json:"exit_code"`
	// Signal is the name of the signal that ended the process ("SIGKILL"),
	// or "" when it exited by itself. Windows has no signals; there it is
	// "TerminateJobObject" when this package killed the job while the shell
	// ran, "CTRL_BREAK_EVENT" when the shell ended with
	// STATUS_CONTROL_C_EXIT.
	Signal    string     `json:"signal,omitempty"`
	Reason    ExitReason `json:"reason,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	ExitedAt  time.Time  `json:"exited_at,omitzero"`
	// CPUTime is user plus system time, known after exit.
	CPUTime time.Duration `json:"cpu_time_ns,omitempty"`
	// MaxRSS is the peak resident set size in bytes, known after exit where
	// the OS reports it. On Windows it is not resident memory: it is the
	// largest peak commit charge (private memory allocated, in RAM or paged
	// out) of any one process of the job, the closest figure Windows keeps
	// per tree.
	MaxRSS int64 `json:"max_rss_bytes,omitempty"`
	// Leftovers counts the processes of the tree this package had to kill
	// beyond the shell's own exit or stop: members of its process group
	// still alive when the shell exited, plus, on Linux, every process
	// outside the group found on any stop path (Stop, Close, the cleanup
	// after the shell exited) because it carried the MarkerEnv marker or,
	// with WithCgroup, sat in the process's cgroup. Each process counts once.
	Leftovers int `json:"leftovers,omitempty"`
	// Timeout is the Request's Timeout; 0 means none.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// Limits are the limits the tree runs under: the Request's merged with
	// the Manager's defaults.
	Limits Limits `json:"limits,omitzero"`
	// IdleTimeout is the Request's IdleTimeout where it applies; 0 means none.
	IdleTimeout time.Duration `json:"idle_timeout_ns,omitempty"`
	// MaxOutput is the Request's MaxOutput; 0 means none.
	MaxOutput int64 `json:"max_output_bytes,omitempty"`
	// LikelyOOM is true when the process ended by a SIGKILL (or its shell
	// exited with 137) that this package did not send while the kernel's
	// host-wide OOM kill counter (/proc/vmstat oom_kill) rose: probably the
	// OOM killer, but another process's OOM kill or another sender cannot be
	// ruled out. It is only set where the tree's own count is unknown
	// (without WithCgroup and its memory controller); where it is known,
	// Reason is ReasonOOM instead.
	LikelyOOM bool `json:"likely_oom,omitempty"`
	// LogPath is the file holding the full output (WithOutputLog), or ""
	// without one. The file is removed, in the background, once retention
	// drops the process, and by Close.
	LogPath string `json:"log_path,omitempty"`
	// Stdin is true when the caller can write the process's stdin
	// (Request.Stdin or Request.TTY).
	Stdin bool `json:"stdin"`
	// TTY is true when the process runs under a pseudo-terminal.
	TTY bool `json:"tty"`
	// Detached is true for a Request.Detach process, which outlives the
	// Manager.
	Detached bool `json:"detached,omitempty"`
	// Ports are the sockets the tree listened on at the latest scan (see
	// Process.Ports), rescanned at least once a second for Background
	// processes and while someone is in WaitPort; nil for other processes,
	// for exited ones and where Ports is unsupported.
	Ports []Port `json:"ports,omitempty"`
	// AwaitingInput is true while a process of the tree is blocked reading
	// its stdin and the tree has written nothing for the quiet period (see
	// WithInputQuiet; Linux only, false elsewhere). WriteStdin clears it.
	AwaitingInput bool `json:"awaiting_input"`
	// Ready is true once the check of Request.Ready has passed.
	Ready bool `json:"ready,omitempty"`
}

// Output is one consistent snapshot of a process's state and output: when
// Info says the process has exited, Text is final.
type Output struct {
	Info
	// Text is valid UTF-8: the whole output, or head, one marker line saying
	// how many bytes were omitted, and tail. Lines longer than the Manager's
	// maxLineBytes are cut with a visible suffix.
	Text string `json:"output"`
	// Truncated is nil when Text is the whole output unchanged.
	Truncated *Truncation `json:"truncated,omitempty"`
}

// Process is one command started by a Manager. Its methods are safe for
// concurrent use. A Process stays usable after the Manager drops it by
// retention; it is then no longer found by Get or List.
type Process struct {
	m     *Manager
	id    string
	owner string // immutable, so readable without mu
	seq   uint64
	key   *keyEntry // set under m.mu; nil without a Key
	buf   *outputBuffer
	log   *outputLog // nil without WithOutputLog
	sys   *sysProc
	ctr   *containment // what of the tree may leave the group
	guard guard        // idle, output and OOM watch; immutable after Start
	cmd   *exec.Cmd
	in    *input // nil without Stdin or TTY
	done  chan struct{}
	// escalated is closed when the stop ladder moves from terminate to
	// kill (see escalate).
	escalated    chan struct{}
	escalateOnce sync.Once

	dropped bool // retention dropped it; guarded by Manager.mu

	rec    *stateRecord // nil without WithStateDir; only spawn and the supervisor touch it
	det    *detached    // nil unless Request.Detach; see detach_linux.go
	events eventGate    // orders this process's events; see events.go
	// inputSig tells WaitOutput about input detection; guarded by mu.
	inputSig inputSignal
	// stdinWritten is set by WriteStdin for the input watcher.
	stdinWritten atomic.Bool
	// readyDone is closed when the readiness check of Request.Ready has
	// ended; nil without one. Set before the supervisor starts.
	readyDone chan struct{}

	mu         sync.Mutex
	info       Info
	stopReason ExitReason // why this package is ending it, "" if it is not
	signaled   bool       // Signal was called at least once
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
	p.mu.Lock()
	defer p.mu.Unlock()
	// Holding p.mu keeps the exit path from publishing the exit between the
	// check and the signal, so a signal never targets a recycled group.
	if !p.info.Running {
		return ErrNotRunning
	}
	p.signaled = true
	if p.det != nil {
		return p.signalDetachedLocked(sig)
	}
	return p.signalLocked(sig)
}

func (p *Process) signalLocked(sig Signal) error {
	err := p.sys.signal(sig)
	if errors.Is(err, errNoProcess) {
		return ErrNotRunning
	}
	if err != nil {
		return xerrors.Errorf("signal %s to process %s: %w", sig, p.id, err)
	}
	return nil
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
	// reads /proc, so it runs before p.mu is taken; a process that dies
	// between the look and the signal is the same race as one that dies
	// just after the signal.
	live := p.sys.alive()
	p.mu.Lock()
	if !p.info.Running {
		p.mu.Unlock()
		return p.Info(), nil
	}
	// The OS layer may treat a stop's terminate differently from one sent
	// by Signal (Windows: a batch file's prompt after the break).
	p.sys.beginStop()
	// Setting the reason under the same lock as the signal means the exit
	// path, which reads it under p.mu, cannot miss it. SIGCONT follows
	// SIGTERM so that a stopped member acts on it within the grace.
	if err := p.signalLocked(SignalTerminate); live && !errors.Is(err, ErrNotRunning) && p.stopReason == "" {
		p.stopReason = reason
	}
	p.sys.resume()
	p.mu.Unlock()
	// Then whatever left the group. Outside p.mu: the sweep reads /proc, and
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
	if err := p.sys.signal(SignalKill); err != nil && !errors.Is(err, errNoProcess) {
		_ = p.cmd.Process.Kill()
	}
}

// stopping reports whether a stop ladder has sent terminate to the group.
func (p *Process) stopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopReason != ""
}

// groupPoll is how often the supervisor looks whether a stopping group has
// emptied after its shell exited. The kernel has no event for "a process
// group is empty", and this only runs during a stop's grace period.
const groupPoll = 5 * time.Millisecond

// awaitGroup waits, during a stop, until no member of the group is left or
// the ladder escalates to kill. Members that got terminate with the shell
// may still be cleaning up; Stop promises them the grace period.
func (p *Process) awaitGroup() {
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for p.sys.alive() {
		select {
		case <-p.escalated:
			return
		case <-tick.C:
		}
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

// defaultPipeDrain bounds how long the exit path waits for the output pipe
// to reach EOF after the shell exited and its leftovers were killed. Only
// processes that left the tree (and so escaped the kill) can hold the pipe
// that long. It is real time on purpose: it is enforced by the pipe's read
// deadline. It is config.pipeDrain, so that tests can make waiting it out
// unmistakable.
const defaultPipeDrain = 2 * time.Second

// supervise runs in its own goroutine from Start until the process has
// exited and its output is final. readerDone is closed when the output
// reader has reached EOF or given up.
func (p *Process) supervise(pipe *os.File, readerDone <-chan struct{}) {
	defer p.m.wg.Done()
	p.recordRunning()
	waitErr := p.cmd.Wait()
	p.ctr.reaped()
	state := p.cmd.ProcessState
	// Writes from now on are ErrStdinClosed, whatever is left of the tree.
	p.in.closeAtExit()

	if p.stopping() {
		p.awaitGroup()
	}
	// The shell is gone; whatever is left of its tree is killed now so that
	// nothing outlives the command and the pipe can reach EOF: the group,
	// then what escaped it, so that Wait does not sit out the pipe drain for
	// escaped descendants that hold the pipe.
	leftovers := p.sys.leftovers()
	leftovers += p.ctr.killEscaped()
	select {
	case <-readerDone:
	default:
		if err := pipe.SetReadDeadline(time.Now().Add(p.m.cfg.pipeDrain)); err != nil {
			// Every output file this package makes takes a deadline (a
			// pipe, an overlapped named pipe on Windows, a PTY master or
			// its relay on macOS); should one not, only EOF ends the drain.
			p.m.cfg.logger.Warn(context.Background(), "pipe deadline unavailable", fieldError(err))
		}
		<-readerDone
	}
	_ = pipe.Close()

	code, sigName := -1, ""
	var cpu time.Duration
	var rss int64
	if state != nil {
		code, sigName = p.sys.exitStatus(state)
		cpu, rss = p.ctr.usage(p.sys.usage(state))
	} else {
		p.m.cfg.logger.Warn(context.Background(), "wait failed", fieldError(waitErr))
	}
	oom, likelyOOM := p.guard.oomVerdict(p.ctr, code, sigName)
	p.sys.release()
	if err := p.ctr.release(); err != nil {
		p.m.cfg.logger.Warn(context.Background(), "release containment", fieldError(err))
	}

	now := p.m.cfg.clock.Now("agentproc", "exit")
	p.recordExit(code, sigName, oom, now)
	// The running slot is given back before the exit is published, so a
	// caller that sees it (Wait, Info, an EOF chunk) can start another
	// process at once under WithMaxRunning.
	p.m.exited(p, now)
	p.mu.Lock()
	p.info.ExitCode = &code
	p.info.Signal = sigName
	p.info.ExitedAt = now
	p.info.CPUTime = cpu
	p.info.MaxRSS = rss
	p.info.Leftovers = leftovers
	p.info.LikelyOOM = likelyOOM && p.stopReason == "" && !p.signaled
	switch {
	case p.stopReason != "":
		p.info.Reason = p.stopReason
	case oom:
		p.info.Reason = ReasonOOM
	case sigName != "" && p.signaled:
		p.info.Reason = ReasonKilled
	case sigName != "":
		p.info.Reason = ReasonSignaled
	default:
		p.info.Reason = ReasonExited
	}
	// Closing the buffer inside the same critical section means a reader
	// that sees EOF and then asks for Info is told the process has exited.
	p.buf.closeWrite()
	p.info.Running = false
	p.info.Ports, p.info.AwaitingInput = nil, false // a gone tree listens and reads nothing
	p.mu.Unlock()

	close(p.done)
	if p.readyDone != nil {
		// The check ends promptly now: WaitPort on done, WaitMatch on the
		// EOF it reads after closeWrite.
		<-p.readyDone
	}
	p.emitInfo(EventExited)
}
