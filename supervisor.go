package agentproc

import (
	"context"
	"os"
	"sync"
	"time"

	"cdr.dev/slog/v3"
	"github.com/google/uuid"
	"golang.org/x/xerrors"
)

// This file is the life of one process, in the order it happens:
//
//   - spawn: Manager.Start has validated the request and reserved a running
//     slot; spawn builds the command, starts it, and makes the Process.
//   - copy output: one goroutine copies the output pipe into the buffer and
//     the output log until EOF.
//   - supervise: another waits for the shell, then kills what is left of
//     its tree so that nothing outlives the command, and lets the pipe drain.
//   - release: OS handles (job, cgroup, pidfds) are freed.
//   - exit: the state record and the registry (registerExit: the slot, retention) learn of it, then the exit is
//     published in Info together with the buffer's EOF, then Done closes.
//
// Process (process.go) is the caller's handle: it reads Info, signals and
// stops, and never runs any of these steps itself. What only these steps
// and the stop ladder use is grouped in its embedded supervisor.

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
		return p, func() { go p.superviseDetached() }, nil
	}
	id := uuid.NewString()
	env := m.buildEnv(req.Env, id, dir, req.TTY != nil)
	// The output log and the containment beyond the process group (marker
	// sweep, cgroup) are set up first: a log or a cgroup that cannot be
	// made fails Start before anything runs.
	log, err := m.logs.open(id)
	if err != nil {
		return nil, nil, err
	}
	ctr, err := newContainment(id, &m.cfg)
	if err != nil {
		m.logs.discard(log)
		return nil, nil, xerrors.Errorf("agentproc: set up containment: %w", err)
	}

	st, err := openStdio(req, m.cfg.stdinStall)
	if err != nil {
		m.logs.discard(log)
		_ = ctr.release()
		return nil, nil, err
	}
	// A context that never ends: the kill step is the ladder's own
	// (Process.killTree), not os/exec's. With a cancellable context os/exec
	// runs a goroutine per command to watch it, and Wait hands off to that
	// goroutine and back after every exit.
	cmd := m.shellCmd(command)
	cmd.Dir = dir
	cmd.Env = env
	st.attach(cmd)
	sys := newSysProc(&m.cfg)

	fail := func(step string, err error) (*Process, func(), error) {
		m.logs.discard(log)
		_ = ctr.release()
		st.closeAll()
		return nil, nil, xerrors.Errorf("agentproc: %s: %w", step, err)
	}
	// Everything the child is started with that the OS layer decides is
	// set by sys.prepare alone, so no step undoes another.
	if err := sys.prepare(cmd, childAttrs{tty: st.tty, cgroupFD: ctr.prepare()}); err != nil {
		return fail("prepare process", err)
	}
	if err := applyLimits(req.Limits, sys, ctr); err != nil {
		return fail("apply limits", err)
	}
	// Recorded before the start, so that a host that dies at any moment
	// after it leaves a record for the next Manager (WithStateDir).
	rec := m.state.newRecord(m, id, owner, command, dir, req, warnings, m.outputLogPath(id))
	if err := m.state.recordStarting(rec, ctr.cgroupPath()); err != nil {
		return fail("record process", err)
	}
	if err := cmd.Start(); err != nil {
		sys.release()
		m.forgetShellPath()
		m.state.abandon(rec)
		return fail("start "+m.cfg.shell[0]+ctr.describe(), err)
	}
	ctr.started(cmd)
	oomValue := m.raiseOOMScore(cmd.Process.Pid)
	inID := stdinIdentity(st.childIn)
	// Only the child holds the write end now, so EOF comes when the last
	// process of the tree that inherited it is gone.
	st.closeChild()
	if err := sys.started(cmd); err != nil {
		_ = cmd.Wait()
		m.logs.discard(log)
		sys.release()
		_ = ctr.killEscaped()
		_ = ctr.release()
		st.closeAll()
		m.state.abandon(rec)
		return nil, nil, xerrors.Errorf("agentproc: contain process: %w", err)
	}

	p = &Process{
		m:     m,
		id:    id,
		owner: owner,
		seq:   seq,
		buf:   newOutputBuffer(m.cfg.headBytes, m.cfg.tailBytes),
		log:   log,
		in:    st.in,
		done:  make(chan struct{}),
		supervisor: supervisor{
			cmd: cmd, sys: sys, ctr: ctr, rec: rec, oomValue: oomValue,
			// escalated is made with the process so the ladder and the
			// supervisor never see it nil.
			escalated: make(chan struct{}),
		},
		info: Info{
			ID:         id,
			Command:    command,
			WorkDir:    dir,
			Owner:      owner,
			Background: req.Background,
			Warnings:   warnings,
			Stdin:      st.in != nil,
			TTY:        st.tty,
			Running:    true,
			PID:        cmd.Process.Pid,
			StartedAt:  m.cfg.clock.Now("agentproc", "start"),
			Timeout:    req.Timeout,
			LogPath:    log.pathOrEmpty(),
		},
	}
	p.guard = m.newGuard(req)
	p.info.Limits, p.info.IdleTimeout, p.info.MaxOutput = req.Limits, p.guard.idle, req.MaxOutput
	log.start()
	p.enforceTimeout(req.Timeout)
	p.watchOutput()
	if m.cfg.logDebug {
		m.cfg.logger.Debug(context.Background(), "started process",
			slog.F("id", id), slog.F("pid", cmd.Process.Pid), slog.F("owner", owner))
	}

	// Before the supervisor: it waits for the readiness check that observe
	// may start, so that EventReady always comes before EventExited.
	m.observe(p, req, inID, st.out)
	run = func() {
		readerDone := make(chan struct{})
		go func() {
			defer close(readerDone)
			copyOutput(p.buf, p.log, st.out)
		}()
		go p.supervise(st.out, readerDone)
	}
	return p, run, nil
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
func copyOutput(buf *outputBuffer, log *outputLog, r *os.File) {
	defer log.finish()
	pool := &smallChunks
	chunk := pool.Get().(*[]byte)
	defer func() { pool.Put(chunk) }()
	for {
		n, err := r.Read(*chunk)
		if n > 0 {
			_, _ = buf.Write((*chunk)[:n])
			log.enqueue((*chunk)[:n])
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
	raiseOOMScoreTree(p.cmd.Process.Pid, p.ctr, p.oomValue)
	p.recordRunning()
	waitErr := p.cmd.Wait()
	p.ctr.reaped()
	state := p.cmd.ProcessState
	// Writes from now on are ErrStdinClosed, whatever is left of the tree.
	p.in.closeAtExit()

	leftovers := p.clearTree()
	p.drainOutput(pipe, readerDone)
	code, sigName := -1, ""
	var cpu time.Duration
	var rss int64
	if state != nil {
		code, sigName = p.sys.exitStatus(state)
		cpu, rss = p.ctr.usage(p.sys.usage(state))
	} else {
		p.m.cfg.logger.Warn(context.Background(), "wait failed", fieldError(waitErr))
	}
	// Before release: the verdict reads the cgroup's OOM count.
	oom, likelyOOM := p.guard.oomVerdict(p.ctr, code, sigName)
	p.release()
	p.publishExit(exitFacts{code: code, signal: sigName, cpu: cpu, rss: rss, leftovers: leftovers, oom: oom, likelyOOM: likelyOOM})
}

// clearTree kills whatever is left of the tree once the shell is gone, so
// that nothing outlives the command and the pipe can reach EOF: the group,
// then what escaped it, so that the drain is not sat out for
// escaped descendants that hold the pipe. During a stop, members that got
// terminate with the shell first get the rest of the grace period.
func (p *Process) clearTree() (leftovers int) {
	if p.stopping() {
		p.awaitGroup()
	}
	leftovers = p.sys.killLeftovers()
	leftovers += p.ctr.killEscaped()
	return leftovers
}

// drainOutput waits for the output copier to reach EOF, at most the pipe
// drain once the tree is gone, and closes the pipe.
func (p *Process) drainOutput(pipe *os.File, readerDone <-chan struct{}) {
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
}

// release frees what the OS holds for the process: the job or group, the
// cgroup and pidfds. It runs before the exit is
// published, so that a caller who sees the exit finds nothing still open.
func (p *Process) release() {
	p.sys.release()
	if err := p.ctr.release(); err != nil {
		p.m.cfg.logger.Warn(context.Background(), "release containment", fieldError(err))
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
func (p *Process) publishExit(f exitFacts) {
	now := p.m.cfg.clock.Now("agentproc", "exit")
	p.recordExit(f.code, f.signal, f.oom, now)
	// The running slot is given back before the exit is published, so a
	// caller that sees it (Wait, Info, an EOF chunk) can start another
	// process at once under WithMaxRunning.
	p.m.registerExit(p, now)
	p.mu.Lock()
	p.info.ExitCode = &f.code
	p.info.ExitSignal = f.signal
	p.info.ExitedAt = now
	p.info.CPUTime = f.cpu
	p.info.MaxRSS = f.rss
	p.info.Leftovers = f.leftovers
	p.info.LikelyOOM = f.likelyOOM && p.stopReason == "" && !p.signaled
	switch {
	case p.stopReason != "":
		p.info.Reason = p.stopReason
	case f.oom:
		p.info.Reason = ReasonOOM
	case f.signal != "" && p.signaled:
		p.info.Reason = ReasonKilled
	case f.signal != "":
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
