package agentproc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"cdr.dev/slog/v3"
	"golang.org/x/xerrors"
)

// This file is the life of one process, in the order it happens:
//
//   - spawn: Manager.Start has validated the request and reserved a running
//     slot; spawn builds the command, starts it, and makes the Process.
//   - copy output: one goroutine first raises the tree's oom_score_adj
//     (Linux), then copies the output pipe into the buffer and the output
//     log until EOF, and closes a pipe.
//   - supervise: another waits for the shell (reaping it only once the
//     raise is done), then kills what is left of its tree so that nothing
//     outlives the command, and lets the pipe drain.
//   - release: OS handles (job, cgroup, pidfds) are freed.
//   - exit: the state record and the registry (registerExit: the slot,
//     retention) learn of it, then the exit is published in Info together
//     with the buffer's EOF, then Done closes.
//   - stop, at the end: the ladder that ends the process early (Stop,
//     Close, timeouts and the watchdog), through the same supervisor.
//
// Process (process.go) is the caller's handle: it reads Info, signals and
// stops, and never runs any of these steps itself; it points to its
// supervisor, which holds everything only these steps use.

// supervisor owns the life of one process: the command, its tree (process
// group or Job Object), what of it may escape, the state record, the output
// log, the watchdog, and the stop ladder's escalation. spawn (or adoption)
// sets it before the Process is shared and nothing reassigns its fields;
// the values they point to synchronise themselves. It publishes what it
// learns to its Process (p.state, p.buf, events), never the reverse.
type supervisor struct {
	p *Process // the handle it publishes to

	cmd      *exec.Cmd
	sys      *sysProc
	ctr      *containment // what of the tree may leave the group
	rec      *stateRecord // nil without WithStateDir
	log      *outputLog   // nil without WithOutputLog
	watchdog watchdog     // idle, output and OOM watch (watchdog.go)
	det      *detached    // nil unless Request.Detach; see detach_linux.go
	sbx      *sandboxRun  // nil unless sandboxed; see sandbox_run.go
	// raised is closed once the output reader has raised the tree's
	// oom_score_adj (raiseOOMScore); nil when nothing is raised.
	raised chan struct{}
	// done is closed when the process has exited and its output is final
	// (Process.Done).
	done chan struct{}
	// readyDone is closed when the readiness check of Request.Ready has
	// ended; nil without one. Set before the supervisor starts.
	readyDone chan struct{}
	// escalated is closed when the stop ladder moves from terminate to
	// kill (see escalate).
	escalated    chan struct{}
	escalateOnce sync.Once
}

// spawn starts the command and returns its Process, and run, which starts
// copying its output and supervising it. The caller has reserved a running
// slot and a supervise goroutine in m.wg, and registers the Process before
// calling run: since nothing can publish the exit before run, the registry
// never meets a process that exited before it was listed.
func (m *Manager) spawn(req Request, owner, command, dir string, seq uint64, warnings []string) (p *Process, run func(), err error) {
	if err := m.state.usable(); err != nil {
		return nil, nil, err
	}
	if req.Detach {
		// A detached process is followed through its state files, not
		// supervised as a child (detach_linux.go).
		p, err := m.startDetached(req, owner, command, dir, seq, warnings)
		if err != nil {
			return nil, nil, err
		}
		return p, func() { go p.sup.superviseDetached() }, nil
	}
	// What spawn has taken so far, which the one deferred undo releases
	// if spawn fails (spawnTaken.undo).
	var t spawnTaken
	defer func() {
		if err != nil {
			t.undo(m)
		}
	}()

	var id string
	id, t.claim = m.cgroupSets.take(owner, &m.cfg, req.Limits)
	if t.sbx, err = m.prepareSandbox(req.Sandbox, owner, dir, req.WorkDir != "", req.TTY != nil); err != nil {
		return nil, nil, err
	}
	env := m.buildEnv(req.Env, id, dir, req.TTY != nil, t.sbx)
	// Before the process exists: every stream of m redacts its secrets
	// by the time any tree can read them (its /proc/PID/cmdline).
	m.registerSecrets(req, env)
	// The output log and the containment beyond the process group (marker
	// sweep, cgroup) are set up first: a log or a cgroup that cannot be
	// made fails Start before anything runs.
	if t.log, err = m.logs.open(id); err != nil {
		return nil, nil, err
	}
	if t.ctr, err = newContainment(id, &m.cfg, req.Limits, t.claim); err != nil {
		return nil, nil, xerrors.Errorf(prefixFor(err)+"set up containment: %w", err)
	}
	if t.ctr.needsThread() {
		// The placement moves a thread into the tree's cgroups, never the
		// main thread, which is kept out of its way (osthread.HoldMain) as for the
		// sandbox's throwaway threads.
		m.sandbox.useThreads()
	}
	if t.st, err = openStdio(req, m.cfg.stdinStall); err != nil {
		return nil, nil, err
	}
	// A context that never ends: the kill step is the ladder's own
	// (supervisor.killTree), not os/exec's. With a cancellable context os/exec
	// runs a goroutine per command to watch it, and Wait hands off to that
	// goroutine and back after every exit.
	t.cmd = m.shellCmd(command)
	t.cmd.Dir = dir
	t.cmd.Env = env
	t.st.attach(t.cmd)
	t.sys = newSysProc(&m.cfg)

	// Everything the child is started with that the OS layer decides is
	// set by sys.prepare alone, so no step undoes another.
	attrs := childAttrs{tty: t.st.tty, cgroupFD: t.ctr.prepare(), cgroupNS: t.sbx != nil && t.sbx.built.ownCgroupNS(), peak: m.peaks.mark()}
	if t.sbx != nil && attrs.cgroupFD >= 0 {
		if w := cgroupEscapeWarning(attrs.cgroupNS); w != "" {
			t.sbx.warnings = append(t.sbx.warnings, w)
		}
	}
	if err := t.sys.prepare(t.cmd, attrs); err != nil {
		return nil, nil, xerrors.Errorf(prefixFor(err)+"prepare process: %w", err)
	}
	if err := applyLimits(req.Limits, t.sys, t.ctr); err != nil {
		return nil, nil, xerrors.Errorf(prefixFor(err)+"apply limits: %w", err)
	}
	// Recorded before the start, so that a host that dies at any moment
	// after it leaves a record for the next Manager (WithStateDir).
	newRec := m.state.newRecord(m, id, owner, command, dir, req, warnings, m.outputLogPath(id))
	if err := m.state.recordStarting(newRec, t.ctr.cgroupDir()); err != nil {
		return nil, nil, xerrors.Errorf(prefixFor(err)+"record process: %w", err)
	}
	t.rec = newRec
	if err := startCommand(t.cmd, t.ctr, t.sbx); err != nil {
		m.forgetShellPath()
		return nil, nil, xerrors.Errorf(prefixFor(err)+"start %s%s: %w", m.cfg.shell[0], t.ctr.describe(), err)
	}
	t.started = true
	cerr := t.ctr.started(t.cmd)
	inID := stdinIdentity(t.st.childIn)
	// Only the child holds the write end now, so EOF comes when the last
	// process of the tree that inherited it is gone.
	t.st.closeChild()
	if err := errors.Join(cerr, t.sys.started(t.cmd)); err != nil {
		if cerr != nil {
			_ = t.cmd.Process.Kill() // the rest of the tree by killEscaped
		}
		return nil, nil, xerrors.Errorf(prefixFor(err)+"contain process: %w", err)
	}

	p = m.newProcess(req, id, owner, command, dir, seq, warnings, t.cmd, t.st, &supervisor{
		cmd: t.cmd, sys: t.sys, ctr: t.ctr, rec: t.rec, log: t.log, sbx: t.sbx,
	})
	// Before the proxy serves: its denials name what the tree asked for.
	p.redact = t.sbx.redactHostsToken(m.redactionFor(p, req, env), p)
	if t.sbx != nil {
		if err := t.sbx.serveHosts(p); err != nil {
			// The tree cannot reach its proxy: it would run without the
			// network it asked for. Stop it as a failed start.
			_ = t.cmd.Process.Kill()
			return nil, nil, xerrors.Errorf("agentproc: start proxy: %w", err)
		}
	}
	t.log.start()
	p.enforceTimeout(req.Timeout)
	p.watchOutput()
	if m.cfg.logDebug {
		m.cfg.logger.Debug(context.Background(), "started process",
			slog.F("id", id), slog.F("pid", t.cmd.Process.Pid), slog.F("owner", owner))
	}

	// Before the supervisor: it waits for the readiness check that observe
	// may start, so that EventReady always comes before EventExited.
	m.observe(p, req, inID, t.st.out)
	rd := p.redact
	oomValue := m.oomScoreValue()
	if oomValue != nil {
		p.sup.raised = make(chan struct{})
	}
	return p, p.sup.runFunc(t.cmd.Process.Pid, t.st, rd, oomValue), nil
}

// spawnTaken is what spawn has taken so far, each nil (or false) until
// taken.
type spawnTaken struct {
	claim   *cgroupSetClaim // the ready cgroup sets taken, until ctr takes them
	sbx     *sandboxRun
	log     *outputLog
	ctr     *containment
	st      *stdio
	sys     *sysProc
	cmd     *exec.Cmd
	rec     *stateRecord // once recorded (recordStarting)
	started bool         // cmd.Start succeeded
}

// undo is the one undo of a failed spawn, as os/exec's Cmd.Start has, in
// one fixed order whatever step failed: a started shell is reaped first
// (the contain step kills it before returning when the containment
// failed); what escaped the group is killed before the cgroup it may be in
// is released; the state record is abandoned only once everything it
// names (log, cgroup, tree) is gone, so that a host that dies meanwhile
// leaves the next Manager a record to clean up after; the sandbox goes
// last, once nothing runs under it.
func (t *spawnTaken) undo(m *Manager) {
	if t.started {
		_ = t.cmd.Wait()
	}
	m.logs.discard(t.log)
	if t.sys != nil {
		t.sys.release()
	}
	if t.started {
		_ = t.ctr.killEscaped()
	}
	emptied := false
	if t.ctr != nil {
		_ = t.ctr.release()
		emptied = t.ctr.removeCgroups()
	}
	t.claim.discard()
	if t.st != nil {
		t.st.closeAll()
	}
	m.state.abandon(t.rec)
	t.sbx.finish(m, emptied)
}

// runFunc is what spawn's caller runs once the registry lists p: the
// output reader (which first raises the tree's oom_score_adj when
// oomValue is set) and the supervisor, each on a goroutine of its own.
func (s *supervisor) runFunc(leader int, st *stdio, rd redaction, oomValue []byte) func() {
	return func() {
		readerDone := make(chan struct{})
		go func() {
			defer close(readerDone)
			if oomValue != nil {
				s.p.m.raiseOOMScore(leader, s.ctr, oomValue)
				close(s.raised)
			}
			copyOutput(s.p.buf, s.log, st.out, rd)
			if !st.tty {
				// Nothing reads a pipe after EOF (or the drain's
				// deadline), so it is closed here, while the kernel is
				// still tearing the shell down, rather than on the exit
				// path that Wait waits for.
				_ = st.out.Close()
			}
		}()
		go s.supervise(st.out, readerDone, st.tty)
	}
}

// The reader starts with a small chunk and switches to a large one the first
// time a read fills the small one, growing the pipe's kernel buffer at the
// same moment. Quiet processes (an idle server) then pin only 16 KiB each
// and short commands skip the fcntl, while a fast writer gets reads big enough that the
// buffer copies just the tail of each and a follower wakes once per large
// read rather than once per 16 KiB (BenchmarkFollow measures the follower's
// share). Both sizes are pooled because most commands are short, and a fresh
// chunk per start would be a cost of every Start+Wait.
var (
	smallChunks = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}
	largeChunks = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}
)

// copyOutput copies the pipe into the buffer, and the output log's queue if
// there is one, until EOF or a read error (the drain deadline), then waits
// for the log to be written. A PTY master ends with EIO once no process
// holds the terminal. Neither ever fails or blocks, so the child is
// only ever slowed by the copies themselves.
//
// With a redactor (nil: none), every read passes through it first: it is
// the one stage at the write end, before the buffer assigns offsets, so
// the buffer, the log and everything that reads them see the same
// redacted bytes. What it holds back is released at EOF.
func copyOutput(buf *outputBuffer, log *outputLog, r *os.File, rd redaction) {
	defer log.finish()
	pool := &smallChunks
	chunk := pool.Get().(*[]byte)
	defer func() { pool.Put(chunk) }()
	red := rd.newRedactor(func(p []byte) {
		_, _ = buf.Write(p)
		log.enqueue(p)
	})
	defer red.flush()
	for {
		n, err := r.Read(*chunk)
		if n > 0 {
			red.write((*chunk)[:n])
		}
		if err != nil {
			return
		}
		if n == len(*chunk) && pool == &smallChunks {
			growPipe(r) // a no-op on a PTY master
			pool.Put(chunk)
			pool = &largeChunks
			chunk = pool.Get().(*[]byte)
		}
	}
}

// groupPoll is how often the supervisor looks whether a stopping group has
// emptied after its shell exited. The kernel has no event for "a process
// group is empty", and this only runs during a stop's grace period.
const groupPoll = 5 * time.Millisecond

// awaitGroup waits, during a stop, until no member of the group is left or
// the ladder escalates to kill. Members that got terminate with the shell
// may still be cleaning up; Stop promises them the grace period.
func (s *supervisor) awaitGroup() {
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for s.sys.alive() {
		select {
		case <-s.escalated:
			return
		case <-tick.C:
		}
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
// reader has reached EOF or given up; tty says out is a terminal master.
func (s *supervisor) supervise(out *os.File, readerDone <-chan struct{}, tty bool) {
	defer s.p.m.wg.Done()
	s.recordRunning()
	waited := make(chan struct{})
	go reapTracedThreads(s.cmd.Process.Pid, readerDone, waited)
	s.awaitRaise()
	waitErr := s.cmd.Wait()
	close(waited)
	state := s.cmd.ProcessState
	if state != nil {
		s.sys.reapTraced(state)
	}
	s.ctr.reaped()
	// Writes from now on are ErrStdinClosed, whatever is left of the tree.
	s.p.in.closeAtExit()

	leftovers := s.clearTree()
	s.drainOutput(out, readerDone, tty)
	code, sigName := -1, ""
	var cpu time.Duration
	var rss int64
	if state != nil {
		code, sigName = s.sys.exitStatus(state)
		var fromCgroup bool
		cpu, rss, fromCgroup = s.ctr.usage(s.sys.usage(state))
		if !fromCgroup {
			rss = s.sys.treePeak(state.Pid(), rss)
		}
	} else {
		s.p.m.cfg.logger.Warn(context.Background(), "wait failed", fieldError(waitErr))
	}
	// Before release: the verdict reads the cgroup's OOM count.
	oom, likelyOOM := s.watchdog.oomVerdict(s.ctr, code, sigName)
	s.release()
	s.sbx.inferFileDenials(s.p)
	s.sbx.closeHosts()
	s.publishExit(exitFacts{code: code, signal: sigName, cpu: cpu, rss: rss, leftovers: leftovers, oom: oom, likelyOOM: likelyOOM})
	// After the exit is published, so that Wait does not wait for the
	// rmdirs; Close waits for them (m.wg).
	emptied := s.ctr.removeCgroups()
	s.sbx.finish(s.p.m, emptied)
}

// awaitRaise holds the reap back until the output reader has raised the
// tree's oom_score_adj: it names the shell by PID, and the PID is the
// shell's only until it is reaped. The raise is usually done long before
// the shell exits; then waiting for the exit without reaping costs one
// system call more than os/exec's wait alone.
func (s *supervisor) awaitRaise() {
	if s.raised == nil {
		return
	}
	select {
	case <-s.raised:
		return
	default:
	}
	awaitExitUnreaped(s.cmd.Process.Pid)
	<-s.raised
}

// clearTree kills whatever is left of the tree once the shell is gone, so
// that nothing outlives the command and the pipe can reach EOF: the group,
// then what escaped it, so that the drain is not sat out for
// escaped descendants that hold the pipe. During a stop, members that got
// terminate with the shell first get the rest of the grace period.
func (s *supervisor) clearTree() (leftovers int) {
	if s.p.state.stopping() {
		s.awaitGroup()
	}
	leftovers = s.sys.killLeftovers()
	leftovers += s.ctr.killEscaped()
	return leftovers
}

// drainOutput waits for the output copier to reach EOF, at most the pipe
// drain once the tree is gone. The copier closes a pipe itself; a terminal
// master (tty), which stdin and resizes write to as well, is closed here,
// once the tree is gone.
func (s *supervisor) drainOutput(out *os.File, readerDone <-chan struct{}, tty bool) {
	select {
	case <-readerDone:
	default:
		// The copier may close a pipe between the select and this call:
		// then it has finished, and readerDone is about to be closed.
		if err := out.SetReadDeadline(time.Now().Add(s.p.m.cfg.pipeDrain)); errors.Is(err, os.ErrNoDeadline) {
			// Every output file this package makes takes a deadline (a
			// pipe, an overlapped named pipe on Windows, a PTY master or
			// its relay on macOS); should one not, only EOF ends the drain.
			// The only other error is the copier's close in the meantime,
			// which os reports as poll's "use of closed file", not as
			// os.ErrClosed (TestDrainOutputClosedMeanwhile).
			s.p.m.cfg.logger.Warn(context.Background(), "pipe deadline unavailable", fieldError(err))
		}
		<-readerDone
	}
	if tty {
		_ = out.Close()
	}
}

// release frees what the OS holds for the process: the job or group and
// the pidfds. It runs before the exit is published, so that a caller who
// sees the exit finds nothing still open; the tree's emptied cgroups go
// after (removeCgroups).
func (s *supervisor) release() {
	s.sys.release()
	if err := s.ctr.release(); err != nil {
		s.p.m.cfg.logger.Warn(context.Background(), "release containment", fieldError(err))
	}
}

// exitFacts is what supervise learned about the end of the process.
type exitFacts struct {
	code      int
	signal    string
	cpu       time.Duration
	rss       int64
	leftovers int
	oom       bool // the tree's cgroup counted an OOM kill
	likelyOOM bool // see Info.LikelyOOM
}

// publishExit makes the exit visible: to the registry first, then in Info
// together with the buffer's EOF, then through Done.
func (s *supervisor) publishExit(f exitFacts) {
	p := s.p
	now := p.m.cfg.clock.Now("agentproc", "exit")
	// The signal gate is closed by now (killLeftovers, release), so no Signal or
	// stop can change what this package did: the record and Info are told
	// the same reason.
	stopReason, signaled := p.state.cause()
	reason := exitReason(stopReason, signaled, f.oom, f.signal)
	s.recordExit(f.code, f.signal, reason, now)
	// The running slot is given back before the exit is published, so a
	// caller that sees it (Wait, Info, an EOF chunk) can start another
	// process at once under WithMaxRunning.
	p.m.registerExit(p, now)
	p.state.publishExit(p.buf, func(info *Info) {
		info.ExitCode = &f.code
		info.ExitSignal = f.signal
		info.ExitedAt = now
		info.CPUTime = f.cpu
		info.MaxRSS = f.rss
		info.Leftovers = f.leftovers
		info.LikelyOOM = f.likelyOOM && stopReason == "" && !signaled
		info.Reason = reason
	})

	close(s.done)
	// A goroutine blocked in Wait was just made this P's next to run, but
	// it would still wait for this one to finish the event below. Yielding
	// lets it go first; the event follows at once.
	runtime.Gosched()
	if s.readyDone != nil {
		// The check ends promptly now: WaitPort on done, WaitMatch on the
		// EOF it reads after closeWrite.
		<-s.readyDone
	}
	p.emitInfo(EventExited)
}

// The stop ladder: Signal, Stop, Close, timeouts and the watchdog end the process
// through these. They run on the caller's goroutine, never take a lock
// across a system call, and reach the tree only through the OS handle's
// gate (see sysProc), which the exit path closes before publishing.

// signal is Process.Signal for a valid sig.
func (s *supervisor) signal(sig Signal) error {
	if s.det != nil {
		return s.signalDetached(sig)
	}
	if !s.p.state.running() {
		return ErrNotRunning
	}
	// The check and the signal are not one step, and need not be: the OS
	// handle's signal gate refuses a signal once the exit path has closed it,
	// which it does before publishing the exit, so a signal never targets
	// a recycled group. That the signal went out is recorded under the
	// gate too, so that the exit path cannot miss it.
	return s.signalTree(sig, s.p.state.markSignaled)
}

// signalTree sends sig to the tree through the OS handle; sent runs under
// the handle's signal gate just before the send (see sysProc.signal). It is called
// with no lock held.
func (s *supervisor) signalTree(sig Signal, sent func()) error {
	err := s.sys.signal(sig, sent)
	if errors.Is(err, errNoProcess) {
		return ErrNotRunning
	}
	if err != nil {
		return xerrors.Errorf("signal %s to process %s: %w", sig, s.p.id, err)
	}
	return nil
}

// stop runs the stop ladder. since is the moment from which the processes
// that left the group are looked for (see containment.terminate): when the
// stop was asked for, or, for Close, when Close began. It is monotonic
// real time, not the Manager's clock: it orders reads of /proc.
func (s *supervisor) stop(ctx context.Context, reason ExitReason, since time.Time) (Info, error) {
	p := s.p
	if s.det != nil {
		return s.stopDetached(ctx, reason)
	}
	if s.exited() {
		return p.Info(), nil
	}
	// Only a signal that reached a running process makes this package the
	// cause of the exit. A group that is gone, or holds only the zombie of
	// a shell not yet reaped, belongs to a shell that exited by itself and
	// whose output may still be draining: it keeps its own reason. alive
	// may read /proc, so it runs with no lock held (the lock rule); a
	// process that dies between the look and the signal is the same race as
	// one that dies just after the signal.
	live := s.sys.alive()
	if !p.state.running() {
		return p.Info(), nil
	}
	// The OS layer may treat a stop's terminate differently from one sent
	// by Signal (Windows: a batch file's prompt after the break).
	s.sys.beginStop()
	// The reason is claimed under the OS handle's signal gate just before the
	// signal goes out, so neither the supervisor that the signal wakes nor
	// the exit path, which closes the signal gate before it reads the reason, can
	// miss it; once the signal gate is closed nothing is claimed. SIGCONT follows
	// SIGTERM so that a stopped member acts on it within the grace.
	var claim func()
	if live {
		claim = func() { p.state.claimStop(reason) }
	}
	_ = s.signalTree(SignalTerminate, claim)
	s.sys.resume()
	// Then whatever left the group. The sweep reads /proc, and it verifies
	// every target itself, so it cannot reach a recycled PID even if the
	// process exits meanwhile.
	s.ctr.terminate(since)

	grace := p.m.cfg.clock.NewTimer(p.m.cfg.grace, "agentproc", "grace")
	defer grace.Stop()
	select {
	case <-s.done:
		return p.Info(), nil
	case <-grace.C:
	case <-ctx.Done():
		s.escalate()
		return p.Info(), ctx.Err()
	}
	s.escalate()
	select {
	case <-s.done:
		return p.Info(), nil
	case <-ctx.Done():
		return p.Info(), ctx.Err()
	}
}

// escalate is the kill step of the stop ladder: it tells a supervisor that
// is giving the group its grace period to stop waiting, and kills the tree.
func (s *supervisor) escalate() {
	s.escalateOnce.Do(func() { close(s.escalated) })
	s.killTree()
}

// killTree sends kill to the whole tree (the group on Unix, the job on
// Windows). Should that fail for another reason than the tree being gone,
// the shell is killed through its process handle, which names it even if
// its PID has been reused.
func (s *supervisor) killTree() {
	if err := s.sys.signal(SignalKill, nil); err != nil && !errors.Is(err, errNoProcess) {
		_ = s.cmd.Process.Kill()
	}
}

// exited reports whether the process has exited.
func (s *supervisor) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
