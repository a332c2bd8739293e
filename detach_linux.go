package agentproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cdr.dev/slog/v3"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// A detached process (Request.Detach) is run by a runner: a copy of the
// host binary (/proc/self/exe, like the guard) in a session of its own that
// starts the shell in a process group of its own, copies the shell's output
// into segment files in the state dir, and, once the shell has exited and
// what was left of its group is killed, writes the exit status there and
// exits. The runner is outside the shell's group and does not carry the
// marker, so every signal and stop reaches the shell's tree and never the
// runner, which is always there to record how the tree ended. It catches
// SIGINT, SIGTERM and SIGHUP (a caught signal is reset at exec, so the shell
// gets the default dispositions) and ignores them.
//
// Files, in dir/out/ID/:
//
//	seg-N   output bytes [N*segBytes, (N+1)*segBytes); the first
//	        detachHeadSegs are kept, later ones only the last two
//	status  {"code":N,"signal":"SIGTERM"} once the shell has exited
//
// A Manager (the one that started the process, or one that adopted it)
// follows the segments with inotify and learns of the runner's exit from a
// pidfd: no polling.

const (
	detachRunnerEnv = "AGENTPROC_DETACH_RUNNER" // "1" makes init run the runner
	detachDirEnv    = "AGENTPROC_DETACH_DIR"
	detachSegEnv    = "AGENTPROC_DETACH_SEGBYTES"
	detachIDEnv     = "AGENTPROC_DETACH_ID" // the marker's value, given to the shell only
	// detachHeadSegs segments are the head; the tail is the last two.
	detachHeadSegs = 2
	// DefaultDetachLogBytes caps a detached process's output files without
	// WithOutputLog: about half of it is the head, the rest the tail.
	DefaultDetachLogBytes = 8 << 20
	// detachStartWait bounds how long Start waits for the runner to report
	// the shell's PID.
	detachStartWait = 10 * time.Second
)

func init() {
	if os.Getenv(detachRunnerEnv) == "1" {
		os.Exit(runDetached(os.Args[1:]))
	}
}

func detachSupported() error { return nil }

// detachStatus is the status file.
type detachStatus struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
}

func segPath(dir string, n int64) string { return filepath.Join(dir, "seg-"+strconv.FormatInt(n, 10)) }

// runDetached is the runner's main. argv is the shell and the command.
func runDetached(argv []string) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	signal.Ignore(syscall.SIGPIPE)
	dir := os.Getenv(detachDirEnv)
	segBytes, _ := strconv.ParseInt(os.Getenv(detachSegEnv), 10, 64)
	if dir == "" || segBytes <= 0 || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "agentproc runner: bad environment")
		return 2
	}
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case detachRunnerEnv, detachDirEnv, detachSegEnv:
		case detachIDEnv:
			env = append(env, MarkerEnv+"="+v)
		default:
			env = append(env, kv)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentproc runner:", err)
		return 1
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "agentproc runner: start:", err)
		return 1
	}
	_ = w.Close()
	pid := cmd.Process.Pid
	// Read before the shell is reaped below: a zombie keeps its start time.
	id, _, _ := statIdentity(pid)
	// The host reads the leader from stdout; then stdout is let go so the
	// host's pipe reaches EOF.
	fmt.Fprintf(os.Stdout, "%d %d\n", pid, id.Start)
	_ = os.Stdout.Close()

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		writeSegments(r, dir, segBytes)
	}()
	_ = cmd.Wait()
	// What is left of the group is killed so the pipe can reach EOF; the
	// shell is reaped, but the group ID stays ours while a member lives.
	_ = unix.Kill(-pid, unix.SIGKILL)
	select {
	case <-copied:
	case <-time.After(defaultPipeDrain):
		_ = r.SetReadDeadline(time.Now())
		<-copied
	}
	code, sig := (&sysProc{}).exitStatus(cmd.ProcessState) // a group adds nothing to the wait status
	data, _ := json.Marshal(detachStatus{Code: code, Signal: sig})
	tmp := filepath.Join(dir, ".status.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		_ = os.Rename(tmp, filepath.Join(dir, "status"))
	}
	return 0
}

// writeSegments copies r into segment files of segBytes each until EOF,
// removing tail segments older than the last two.
func writeSegments(r io.Reader, dir string, segBytes int64) {
	buf := make([]byte, 64<<10)
	var seg int64
	var off int64
	var f *os.File
	open := func() {
		var err error
		f, err = os.OpenFile(segPath(dir, seg), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			f = nil
		}
		if old := seg - 2; old >= detachHeadSegs {
			_ = os.Remove(segPath(dir, old))
		}
	}
	open()
	for {
		n, err := r.Read(buf)
		p := buf[:n]
		for len(p) > 0 {
			take := min(int64(len(p)), segBytes-off)
			if f != nil {
				_, _ = f.Write(p[:take])
			}
			p = p[take:]
			off += take
			if off == segBytes {
				if f != nil {
					_ = f.Close()
				}
				seg++
				off = 0
				open()
			}
		}
		if err != nil {
			break
		}
	}
	if f != nil {
		_ = f.Close()
	}
}

// detached is what a Process has when it is detached.
type detached struct {
	dir      string    // dir/out/ID
	segBytes int64     // from the record
	runner   *exec.Cmd // nil when adopted: the runner is not our child
	runnerFD int       // pidfd of the runner
	leader   hostIdentity
	stopWake int // eventfd: Close stops the follower without the process exiting
	ended    chan struct{}
	once     sync.Once

	// gate is this handle's own lock, as sysProc's is: a signal holds it
	// across its check of the runner and its kill(2), and the follower
	// shuts it before it publishes the exit or closes runnerFD, so a signal
	// never uses a closed descriptor and what it records under the gate is
	// seen by the exit. It is never taken with the Process's lock held.
	gate sync.Mutex
	// shut is set once the runner exited or the Manager closed; released
	// says it was the latter. Both are guarded by gate.
	shut, released bool
}

// shutGate closes the gate: no signal goes out from here on. released says
// the Manager closed rather than the runner exiting.
func (d *detached) shutGate(released bool) {
	d.gate.Lock()
	d.shut, d.released = true, released
	d.gate.Unlock()
}

// startDetached starts req through a runner and returns the running
// Process. The caller has reserved a slot and a supervise goroutine.
func (m *Manager) startDetached(req Request, owner, command, dir string, seq uint64, warnings []string) (*Process, error) {
	id := uuid.NewString()
	env := m.buildEnv(req.Env, id, dir, req.TTY != nil, nil)
	s := m.state
	outDir := filepath.Join(s.dir, "out", id)
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return nil, xerrors.Errorf("agentproc: state dir %q: create output dir: %w", s.dir, err)
	}
	segBytes := max(m.detachLogBytes()/(2*detachHeadSegs), 4096)

	rec := s.newRecord(m, id, owner, command, dir, req, warnings, "")
	rec.Detached = true
	rec.SegBytes = segBytes
	if err := s.create(rec); err != nil {
		_ = os.RemoveAll(outDir)
		return nil, xerrors.Errorf("agentproc: record process: %w", err)
	}
	fail := func(step string, err error) (*Process, error) {
		if rec.file != nil {
			_ = rec.file.Close()
		}
		s.remove(id)
		_ = os.RemoveAll(outDir)
		return nil, xerrors.Errorf("agentproc: %s: %w", step, err)
	}

	runnerEnv := make([]string, 0, len(env)+4)
	for _, kv := range env {
		if !strings.HasPrefix(kv, MarkerEnv+"=") {
			runnerEnv = append(runnerEnv, kv)
		}
	}
	runnerEnv = append(runnerEnv, detachRunnerEnv+"=1", detachDirEnv+"="+outDir,
		detachSegEnv+"="+strconv.FormatInt(segBytes, 10), detachIDEnv+"="+id)
	out, err := os.Open(os.DevNull)
	if err != nil {
		return fail("open null device", err)
	}
	defer out.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail("start runner", err)
	}
	defer pr.Close()
	runner := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{"agentproc-detached"}, append(slices.Clone(m.cfg.shell), command)...),
		Env:         runnerEnv,
		Dir:         dir,
		Stdin:       out,
		Stdout:      pw,
		Stderr:      out,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := runner.Start(); err != nil {
		_ = pw.Close()
		return fail("start runner", err)
	}
	_ = pw.Close()
	_ = pr.SetReadDeadline(time.Now().Add(detachStartWait))
	line, err := bufio.NewReader(pr).ReadString('\n')
	var leader hostIdentity
	if err == nil {
		_, err = fmt.Sscanf(line, "%d %d", &leader.PID, &leader.Start)
	}
	if err != nil || leader.PID <= 0 {
		_ = runner.Process.Kill()
		_ = runner.Wait()
		return fail("start "+m.cfg.shell[0]+" through the runner", xerrors.Errorf("no PID from the runner: %v", err))
	}
	leader.Boot = s.host.Boot
	// A quick command's runner may have exited already; as our unreaped
	// child it still has its start time.
	runnerID, _, _ := statIdentity(runner.Process.Pid)
	rec.Leader, rec.Runner = leader, runnerID
	if err := s.appendUpdate(rec, recordUpdate{Leader: &rec.Leader, Runner: &rec.Runner}); err != nil {
		m.cfg.logger.Warn(context.Background(), "update process record", slog.F("id", id), fieldError(err))
	}
	_ = rec.file.Close()
	rec.file = nil

	fd, err := unix.PidfdOpen(runner.Process.Pid, 0)
	if err != nil {
		return fail("watch runner", err)
	}
	p := m.newDetachedProcess(rec, seq)
	p.sup.det.runner = runner
	p.sup.det.runnerFD = fd
	p.state.info.Warnings = warnings
	p.state.info.StartedAt = m.cfg.clock.Now("agentproc", "start")
	// The caller starts superviseDetached once the registry lists p (see
	// spawn).
	return p, nil
}

// detachLogBytes is the cap on a detached process's output files.
func (m *Manager) detachLogBytes() int64 {
	if m.cfg.logMaxBytes > 0 {
		return m.cfg.logMaxBytes
	}
	return DefaultDetachLogBytes
}

// newDetachedProcess makes the running Process of a detached record. The
// caller sets runnerFD and starts superviseDetached.
func (m *Manager) newDetachedProcess(r *stateRecord, seq uint64) *Process {
	wake, _ := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	p := &Process{
		m:     m,
		id:    r.ID,
		owner: r.Owner,
		seq:   seq,
		buf:   newOutputBuffer(m.cfg.headBytes, m.cfg.tailBytes),
		sup: &supervisor{
			done:      make(chan struct{}),
			escalated: make(chan struct{}),
			rec:       r,
			det: &detached{
				dir:      filepath.Join(m.state.dir, "out", r.ID),
				segBytes: r.SegBytes,
				runnerFD: -1,
				leader:   r.Leader,
				stopWake: wake,
				ended:    make(chan struct{}),
			},
		},
		state: handleState{info: Info{
			ID:         r.ID,
			Command:    r.Command,
			WorkDir:    r.WorkDir,
			Owner:      r.Owner,
			Background: r.Background,
			Warnings:   r.Warnings,
			Running:    true,
			PID:        r.Leader.PID,
			StartedAt:  r.StartedAt,
			Detached:   true,
		}},
	}
	p.sup.p = p
	return p
}

// superviseDetached follows the output files until the runner exits (its
// pidfd polls readable) or the Manager closes, then publishes the exit.
func (s *supervisor) superviseDetached() {
	p := s.p
	defer p.m.wg.Done()
	d := s.det
	defer close(d.ended)
	defer func() {
		_ = unix.Close(d.runnerFD)
		// After this Do, releaseDetached writes nothing more to stopWake
		// (sync.Once also makes a write in progress finish first).
		d.once.Do(func() {})
		_ = unix.Close(d.stopWake)
	}()
	f := &segFollower{dir: d.dir, segBytes: d.segBytes, buf: p.buf}
	defer f.close()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == nil {
		defer unix.Close(in)
		if _, err := unix.InotifyAddWatch(in, d.dir, unix.IN_MODIFY|unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
			p.m.cfg.logger.Warn(context.Background(), "watch detached output", fieldError(err))
		}
	}
	drain := make([]byte, 4096)
	for {
		f.follow()
		pfds := []unix.PollFd{
			{Fd: int32(d.runnerFD), Events: unix.POLLIN},
			{Fd: int32(d.stopWake), Events: unix.POLLIN},
		}
		if in >= 0 {
			pfds = append(pfds, unix.PollFd{Fd: int32(in), Events: unix.POLLIN})
		}
		// Without inotify (none left), output is picked up at exit only.
		_, err := unix.Poll(pfds, -1)
		if err != nil && err != unix.EINTR {
			p.m.cfg.logger.Warn(context.Background(), "watch detached process", fieldError(err))
		}
		if pfds[1].Revents != 0 || (err != nil && err != unix.EINTR) {
			// The Manager closed: the process runs on, unwatched.
			d.shutGate(true)
			return
		}
		if len(pfds) > 2 && pfds[2].Revents != 0 {
			for {
				if n, err := unix.Read(in, drain); n <= 0 || err != nil {
					break
				}
			}
		}
		if pfds[0].Revents != 0 {
			break
		}
	}
	// Before the exit reads why the process ended: a signal that went out
	// has recorded itself by now, and none goes out after.
	d.shutGate(false)
	if d.runner != nil {
		_ = d.runner.Wait()
	}
	f.follow()
	s.finishDetached(readDetachStatus(d.dir))
}

// finishDetached publishes the exit of a detached process.
func (s *supervisor) finishDetached(st *detachStatus) {
	p := s.p
	code, sigName := -1, ""
	if st != nil {
		code, sigName = st.Code, st.Signal
	}
	now := p.m.cfg.clock.Now("agentproc", "exit")
	// The follower shut the gate before this: the cause is final.
	stopReason, signaled := p.state.cause()
	reason := exitReason(stopReason, signaled, false, sigName)
	if st == nil && stopReason == "" {
		reason = ReasonOrphaned // the runner wrote no status
	}
	r := s.rec
	r.Exited, r.ExitCode, r.Signal, r.Reason, r.ExitedAt = true, code, sigName, reason, now
	r.Manager, r.Host = p.m.instance, p.m.state.host
	if err := p.m.state.rewrite(r); err != nil {
		p.m.cfg.logger.Warn(context.Background(), "update process record", slog.F("id", r.ID), fieldError(err))
	}
	p.m.registerExit(p, now)
	p.state.publishExit(p.buf, func(info *Info) {
		info.ExitCode = &code
		info.ExitSignal = sigName
		info.ExitedAt = now
		info.Reason = reason
	})
	close(s.done)
	p.emitInfo(EventExited)
}

func readDetachStatus(dir string) *detachStatus {
	data, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return nil
	}
	var st detachStatus
	if json.Unmarshal(data, &st) != nil {
		return nil
	}
	return &st
}

// segFollower copies new bytes of the segment files into buf.
type segFollower struct {
	dir      string
	segBytes int64
	buf      *outputBuffer
	seg      int64
	off      int64
	f        *os.File
	chunk    []byte
}

// follow reads everything written so far. When the segment it needs was
// removed (the tail rolled past it), it jumps to the oldest one left and
// counts the bytes between as omitted.
func (f *segFollower) follow() {
	if f.chunk == nil {
		f.chunk = make([]byte, 64<<10)
	}
	for {
		if f.f == nil {
			file, err := os.Open(segPath(f.dir, f.seg))
			if err != nil {
				next, ok := f.oldestAfter(f.seg)
				if !ok {
					return
				}
				f.buf.skip((next-f.seg)*f.segBytes - f.off)
				f.seg, f.off = next, 0
				continue
			}
			if f.off > 0 {
				if _, err := file.Seek(f.off, io.SeekStart); err != nil {
					_ = file.Close()
					return
				}
			}
			f.f = file
		}
		n, err := f.f.Read(f.chunk[:min(int64(len(f.chunk)), f.segBytes-f.off)])
		if n > 0 {
			_, _ = f.buf.Write(f.chunk[:n])
			f.off += int64(n)
		}
		if f.off == f.segBytes {
			_ = f.f.Close()
			f.f = nil
			f.seg++
			f.off = 0
			continue
		}
		if n == 0 || err != nil {
			return
		}
	}
}

// oldestAfter returns the lowest segment number above seg that exists.
func (f *segFollower) oldestAfter(seg int64) (int64, bool) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return 0, false
	}
	best := int64(-1)
	for _, e := range entries {
		n, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), "seg-"), 10, 64)
		if err != nil || !strings.HasPrefix(e.Name(), "seg-") || n <= seg {
			continue
		}
		if best < 0 || n < best {
			best = n
		}
	}
	return best, best >= 0
}

func (f *segFollower) close() {
	if f.f != nil {
		_ = f.f.Close()
	}
}

// skip counts n bytes the buffer will never see (the middle of a long
// output whose files rolled on). The head stops growing there, so that it
// stays the true start of the output, and the tail restarts after the gap.
func (b *outputBuffer) skip(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.headBytes = len(b.head)
	b.written += n
	b.ringLen, b.ringEnd = 0, 0
	b.wakeLocked()
}

// signalDetached sends sig to a detached process's group. The runner holds
// the shell unreaped until it has exited, so while the runner is alive and
// the leader still has its recorded identity the group is ours. It takes
// only the gate, and the Process's lock after a delivered signal.
func (s *supervisor) signalDetached(sig Signal) error {
	p := s.p
	d := s.det
	d.gate.Lock()
	defer d.gate.Unlock()
	if d.released {
		return ErrClosed
	}
	if d.shut || pidfdExited(d.runnerFD) {
		return ErrNotRunning
	}
	if err := unix.Kill(-d.leader.PID, osSignal(sig)); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return ErrNotRunning
		}
		return xerrors.Errorf("signal %s to process %s: %w", sig, p.id, err)
	}
	p.state.markSignaled()
	return nil
}

// stopDetached is Stop for a detached process: terminate to the group and
// everything carrying the marker, the grace period, then kill.
func (s *supervisor) stopDetached(ctx context.Context, reason ExitReason) (Info, error) {
	p := s.p
	if !p.state.running() {
		return p.Info(), nil
	}
	// The reason is claimed under the gate, which the follower shuts before
	// the exit reads it.
	d := s.det
	d.gate.Lock()
	released, shut := d.released, d.shut
	if !shut {
		p.state.claimStop(reason)
	}
	d.gate.Unlock()
	if released {
		return p.Info(), ErrClosed
	}
	if shut {
		// The runner has exited: the exit is being published.
		select {
		case <-s.done:
			return p.Info(), nil
		case <-ctx.Done():
			return p.Info(), ctx.Err()
		}
	}
	tree := []orphanTree{{id: p.id, leader: s.det.leader}}
	k := newTreeKiller(tree)
	defer k.close()
	k.round(unix.SIGTERM)
	grace := p.m.cfg.clock.NewTimer(p.m.cfg.grace, "agentproc", "grace")
	defer grace.Stop()
	select {
	case <-s.done:
		return p.Info(), nil
	case <-grace.C:
	case <-ctx.Done():
	}
	for range maxSweepRounds {
		if k.round(unix.SIGKILL) == 0 {
			break
		}
	}
	select {
	case <-s.done:
		return p.Info(), ctx.Err()
	case <-ctx.Done():
		return p.Info(), ctx.Err()
	}
}

// releaseDetached stops following a detached process without stopping it
// (Close): its supervisor ends and it runs on for the next Manager.
func (s *supervisor) releaseDetached() {
	d := s.det
	d.once.Do(func() {
		var one [8]byte
		one[0] = 1
		_, _ = unix.Write(d.stopWake, one[:])
	})
	<-d.ended
}

// adoptDetached makes the Process of a detached record left by a dead
// Manager: still running when its runner is alive (its exit is then
// watched like any other), else exited with the status the runner wrote.
func (m *Manager) adoptDetached(r *stateRecord) *Process {
	p := m.newDetachedProcess(r, 0)
	if r.Runner.PID > 0 && r.Runner.Boot == m.state.host.Boot {
		if fd, err := unix.PidfdOpen(r.Runner.PID, 0); err == nil {
			// Checked after pinning: a reused PID fails here.
			if id, ok := identityOf(r.Runner.PID); ok && id.Start == r.Runner.Start {
				// Running: the caller starts superviseDetached once p
				// is registered.
				p.sup.det.runnerFD = fd
				return p
			}
			_ = unix.Close(fd)
		}
	}
	// The runner is gone: what it wrote is all there is.
	_ = unix.Close(p.sup.det.stopWake)
	close(p.sup.det.ended)
	f := &segFollower{dir: p.sup.det.dir, segBytes: p.sup.det.segBytes, buf: p.buf}
	f.follow()
	f.close()
	st := readDetachStatus(p.sup.det.dir)
	code, sigName, reason := -1, "", ReasonOrphaned
	if st != nil {
		code, sigName, reason = st.Code, st.Signal, ReasonExited
		if sigName != "" {
			reason = ReasonSignaled
		}
	}
	if r.Exited {
		code, sigName, reason = r.ExitCode, r.Signal, r.Reason
	}
	p.state.info.Running = false
	p.state.info.ExitCode = &code
	p.state.info.ExitSignal = sigName
	p.state.info.Reason = reason
	p.state.info.ExitedAt = r.ExitedAt
	if p.state.info.ExitedAt.IsZero() {
		p.state.info.ExitedAt = m.cfg.clock.Now("agentproc", "recover")
	}
	r.Exited, r.ExitCode, r.Signal, r.Reason, r.ExitedAt = true, code, sigName, reason, p.state.info.ExitedAt
	p.buf.closeWrite()
	close(p.sup.done)
	return p
}
