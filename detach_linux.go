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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cdr.dev/slog/v3"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/pidfd"
	"github.com/agentproc/agentproc/internal/procfs"
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
// The runner is handed its output dir as a descriptor (detachDirFD), which
// the Manager opened and checked in the state dir; it opens its files
// relative to it, never following a symlink. If an oom_score_adj raise is
// due (WithOOMScoreDelta), the runner raises itself before it starts the
// shell, so the shell and everything it forks inherit the value with no
// fork left out; the runner, a small process, carries the raise too.
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
//
// This file is the host's side: starting the runner, following it,
// signalling and stopping the tree, adopting it. The runner's own code,
// which runs only in the re-executed copy, is detach_runner_linux.go.

const (
	detachRunnerEnv = "AGENTPROC_DETACH_RUNNER" // "1": run as the runner (reexec_linux.go)
	detachSegEnv    = "AGENTPROC_DETACH_SEGBYTES"
	detachIDEnv     = "AGENTPROC_DETACH_ID"  // the marker's value, given to the shell only
	detachOOMEnv    = "AGENTPROC_DETACH_OOM" // the oom_score_adj to raise the tree to, if any
	// detachEnvPrefix carries the shell's environment through the runner's:
	// variable i of it is detachEnvPrefix+i+"="+"KEY=VALUE". The runner,
	// unconfined, runs with its own variables and PATH only, so that no
	// variable of the tree's (LD_PRELOAD, GODEBUG, GOTRACEBACK…) acts on it.
	detachEnvPrefix = "AGENTPROC_DETACH_ENV_"
	// detachDirFD is the runner's descriptor of its output dir.
	detachDirFD = 3
	// detachHeadSegs segments are the head; the tail is the last two.
	detachHeadSegs = 2
	// detachStartWait bounds how long Start waits for the runner to report
	// the shell's PID.
	detachStartWait = 10 * time.Second
)

func detachSupported() error { return nil }

// detachStatus is the status file.
type detachStatus struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	// Redactions is the runner's count of replaced secrets (redact.go).
	Redactions int64 `json:"redactions,omitempty"`
}

func segName(n int64) string { return "seg-" + strconv.FormatInt(n, 10) }

// detached is what a Process has when it is detached.
type detached struct {
	out      *os.File  // dir/out/ID, checked; nil when it could not be opened
	segBytes int64     // from the record
	runner   *exec.Cmd // nil when adopted: the runner is not our child
	runnerFD int       // pidfd of the runner
	leader   hostIdentity
	// leaderFD is a pidfd of the shell, pinned and verified (start time and
	// marker) at start or adoption; -1 when that failed or pidfds are
	// unavailable, and then the shell is verified again before each signal.
	leaderFD int
	stopWake int // eventfd: Close stops the follower without the process exiting
	ended    chan struct{}
	once     sync.Once

	// signalGate is this handle's own lock, as sysProc's is: a signal holds it
	// across its check of the runner and its kill(2), and the follower
	// shuts it before it publishes the exit or closes runnerFD, so a signal
	// never uses a closed descriptor and what it records under the signal gate is
	// seen by the exit. It is never taken with the Process's lock held.
	signalGate sync.Mutex
	// shut is set once the runner exited or the Manager closed; released
	// says it was the latter; releasing that Close has begun to let the
	// process go, so no stop may begin. All are guarded by signalGate.
	shut, released, releasing bool
}

// outFD is the descriptor of the output dir, -1 without one.
func (d *detached) outFD() int {
	if d.out == nil {
		return -1
	}
	return int(d.out.Fd())
}

// openOutDir opens (creating it if need be) and checks dir/out/id.
func (s *stateDir) openOutDir(id string) (*os.File, error) {
	fd, err := openPrivateSubdir(s.outFD, filepath.Join(s.dir, "out"), id)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(s.dir, "out", id)), nil
}

// pinLeader returns a pidfd of the shell leader if it is provably the one
// of tree id: pinned first, then its start time and its environment's
// marker checked, so that a PID reused meanwhile fails the check. -1 when
// it is not, or is gone, or pidfds are unavailable.
func pinLeader(leader hostIdentity, id string) int {
	if checkRecordPID("leader", leader.PID) != nil || leader.PID == 0 || leader.Boot != bootID() {
		return -1
	}
	fd, ok := pidfd.Pin(leader.PID, func() bool { return leaderIsOurs(leader, id) })
	if !ok {
		return -1
	}
	return fd // -1 when pidfds are unavailable
}

// leaderIsOurs reports whether leader's PID names the recorded process
// (start time and boot) and it carries tree id's marker.
func leaderIsOurs(leader hostIdentity, id string) bool {
	if checkRecordPID("leader", leader.PID) != nil || leader.PID == 0 || leader.Boot != bootID() {
		return false
	}
	cur, ok := identityOf(leader.PID)
	if !ok || cur.Start != leader.Start {
		return false
	}
	ps, err := newProcScanner()
	if err != nil {
		return false
	}
	defer ps.Close()
	return ps.marked(leader.PID, []byte(MarkerEnv+"="+id))
}

// leaderAlive reports whether the shell is provably still the recorded
// process, so that its PID is the tree's process group: through the pinned
// pidfd, or else by checking it again now.
func (d *detached) leaderAlive(id string) bool {
	if d.leaderFD >= 0 {
		return !pidfd.Exited(d.leaderFD)
	}
	return leaderIsOurs(d.leader, id)
}

// shutGate closes the signal gate: no signal goes out from here on. released says
// the Manager closed rather than the runner exiting.
func (d *detached) shutGate(released bool) {
	d.signalGate.Lock()
	d.shut, d.released = true, released
	d.signalGate.Unlock()
}

// startDetached starts req through a runner and returns the running
// Process. The caller has reserved a slot and a supervise goroutine.
func (m *Manager) startDetached(req Request, owner, command, dir string, seq uint64, warnings []string) (p *Process, err error) {
	id := uuid.NewString()
	s := m.state
	// What startDetached has taken so far, each nil until taken; the
	// deferred undo below releases it if the start fails, as spawn's does.
	var (
		sbx    *sandboxRun
		outDir *os.File     // dir/out/ID, handed to the Process on success
		rec    *stateRecord // once created
	)
	// The one undo, in a fixed order: the record's file, the output dir's
	// descriptor, then the record and out/ID together (out/ID alone before
	// the record exists); the sandbox always, since until the runner has
	// the policy a failure removes the temp dir, and then the runner owns
	// it and the host lets go of its descriptors. A runner that never
	// reported the shell is killed where that is found (startRunner).
	defer func() {
		if err != nil {
			if rec != nil && rec.file != nil {
				_ = rec.file.Close()
			}
			if outDir != nil {
				_ = outDir.Close()
			}
			if rec != nil {
				s.remove(id) // the record and out/ID
			} else if outDir != nil {
				_ = removeAllAt(s.outFD, id)
			}
		}
		sbx.finish(m, false)
	}()

	if sbx, err = m.prepareDetachedSandbox(req.Sandbox, dir, req.WorkDir != "", req.TTY != nil); err != nil {
		return nil, err
	}
	env := m.buildEnv(req.Env, id, dir, req.TTY != nil, sbx)
	m.registerSecrets(req, env) // before the runner and the tree exist
	if outDir, err = s.openOutDir(id); err != nil {
		return nil, xerrors.Errorf("agentproc: state dir %q: create output dir: %w", s.dir, err)
	}
	segBytes := max(m.detachLogBytes()/(2*detachHeadSegs), 4096)
	if sbx != nil {
		warnings = append(slices.Clone(warnings), sbx.warnings...)
	}
	newRec := s.newRecord(m, id, owner, command, dir, req, warnings, "")
	newRec.Detached = true
	if sbx != nil {
		newRec.Sandbox = sbx.info
	}
	newRec.SegBytes = segBytes
	if err := s.create(newRec); err != nil {
		return nil, xerrors.Errorf(prefixFor(err)+"record process: %w", err)
	}
	rec = newRec

	runner, leader, err := m.startRunner(req, id, command, dir, env, segBytes, outDir, sbx)
	if err != nil {
		return nil, err
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

	fd, err := pidfd.OpenChild(runner.Process.Pid)
	if err != nil {
		return nil, xerrors.Errorf(prefixFor(err)+"watch runner: %w", err)
	}
	p = m.newDetachedProcess(rec, seq, outDir)
	p.redact = m.redactionFor(p, req, env)
	p.sup.det.runner = runner
	p.sup.det.runnerFD = fd
	p.sup.det.leaderFD = pinLeader(leader, id)
	p.state.info.Warnings = warnings
	p.state.info.StartedAt = m.cfg.clock.Now("agentproc", "start")
	// The caller starts superviseDetached once the registry lists p (see
	// spawn).
	return p, nil
}

// startRunner starts the runner of process id (reexecCmd) with its output
// dir, the sandbox's descriptors and the secrets to redact, and returns it
// with the shell's PID and start time once the runner has reported them.
// A runner that does not report within detachStartWait is killed and
// reaped, and the temp dir it was to remove is removed here.
func (m *Manager) startRunner(req Request, id, command, dir string, env []string, segBytes int64, outDir *os.File, sbx *sandboxRun) (*exec.Cmd, hostIdentity, error) {
	fail := func(step string, err error) (*exec.Cmd, hostIdentity, error) {
		return nil, hostIdentity{}, xerrors.Errorf(prefixFor(err)+"%s: %w", step, err)
	}
	runnerEnv := make([]string, 0, len(env)+5)
	for i, kv := range env {
		if strings.HasPrefix(kv, MarkerEnv+"=") {
			continue
		}
		runnerEnv = append(runnerEnv, detachEnvPrefix+strconv.Itoa(i)+"="+kv)
		if strings.HasPrefix(kv, "PATH=") {
			runnerEnv = append(runnerEnv, kv) // to find the shell
		}
	}
	runnerEnv = append(runnerEnv,
		detachSegEnv+"="+strconv.FormatInt(segBytes, 10), detachIDEnv+"="+id)
	if v := m.oomScoreValue(); v != nil {
		runnerEnv = append(runnerEnv, detachOOMEnv+"="+string(v))
	}
	extra := []*os.File{outDir} // detachDirFD
	if sbx != nil {
		files, v, err := sbx.runnerFiles()
		if err != nil {
			return fail("pass the sandbox to the runner", err)
		}
		defer func() {
			for _, f := range files {
				_ = f.Close()
			}
		}()
		extra = append(extra, files...) // from detachSandboxFD
		runnerEnv = append(runnerEnv, detachSandboxEnv+"="+v)
	}
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
	// The secrets to redact go over a pipe on the runner's stdin (see
	// runDetached), written once it runs.
	var stdin io.Reader = out
	var secretsR, secretsW *os.File
	var secrets []byte
	if entries := m.redactEntriesFor(req, env); len(entries) > 0 {
		if secretsR, secretsW, err = os.Pipe(); err != nil {
			return fail("start runner", err)
		}
		defer secretsR.Close()
		defer secretsW.Close()
		stdin, secrets = secretsR, encodeSecrets(entries)
	}
	runner := reexecCmd("agentproc-detached", detachRunnerEnv, append(slices.Clone(m.cfg.shell), command), runnerEnv)
	runner.Dir, runner.Stdin, runner.Stdout, runner.Stderr, runner.ExtraFiles = dir, stdin, pw, out, extra
	if err := runner.Start(); err != nil {
		_ = pw.Close()
		return fail("start runner", err)
	}
	_ = pw.Close()
	if secretsW != nil {
		// The runner reads them before anything else. With the read end
		// closed here, a runner that dies first ends this write with
		// EPIPE rather than blocking it; its report below then fails.
		_ = secretsR.Close()
		_, _ = secretsW.Write(secrets)
		_ = secretsW.Close()
	}
	var tmpDir string
	if sbx != nil {
		// The runner removes the temp dir once the tree is gone.
		tmpDir, sbx.tmpDir = sbx.tmpDir, ""
	}
	_ = pr.SetReadDeadline(time.Now().Add(detachStartWait))
	line, err := bufio.NewReader(pr).ReadString('\n')
	var leader hostIdentity
	if err == nil {
		_, err = fmt.Sscanf(line, "%d %d", &leader.PID, &leader.Start)
	}
	if err != nil || leader.PID <= 0 {
		_ = runner.Process.Kill()
		_ = runner.Wait()
		if tmpDir != "" {
			_ = removeTree(tmpDir) // killed, the runner did not
		}
		return fail("start "+m.cfg.shell[0]+" through the runner", xerrors.Errorf("no PID from the runner: %v", err))
	}
	return runner, leader, nil
}

// detachLogBytes is the cap on a detached process's output files.
func (m *Manager) detachLogBytes() int64 {
	if m.cfg.logMaxBytes > 0 {
		return m.cfg.logMaxBytes
	}
	return DefaultDetachLogBytes
}

// newDetachedProcess makes the running Process of a detached record, whose
// output dir is out (nil if it cannot be opened). The caller sets runnerFD
// and leaderFD and starts superviseDetached.
func (m *Manager) newDetachedProcess(r *stateRecord, seq uint64, out *os.File) *Process {
	wake, _ := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	p := &Process{
		m:     m,
		id:    r.ID,
		owner: r.Owner,
		seq:   seq,
		buf:   m.newBuffer(),
		sup: &supervisor{
			done:      make(chan struct{}),
			escalated: make(chan struct{}),
			rec:       r,
			det: &detached{
				out:      out,
				segBytes: r.SegBytes,
				runnerFD: -1,
				leaderFD: -1,
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
			Sandbox:    r.Sandbox.clone(),
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
		closeFD(d.leaderFD)
		if d.out != nil {
			_ = d.out.Close()
		}
		// After this Do, releaseDetached writes nothing more to stopWake
		// (sync.Once also makes a write in progress finish first).
		d.once.Do(func() {})
		_ = unix.Close(d.stopWake)
	}()
	f := newSegFollower(p)
	defer f.close()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == nil && d.out != nil {
		defer unix.Close(in)
		// Watched through the checked descriptor, not by the dir's path.
		watched := procfs.SelfFile("fd/" + strconv.Itoa(d.outFD()))
		if _, err := unix.InotifyAddWatch(in, watched, unix.IN_MODIFY|unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
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
	f.red.flush()
	st := readDetachStatus(d.outFD())
	// What is left of the tree is swept (marker and verified group) before
	// the exit is published, so that a process reported exited has nothing
	// left running: the runner kills only the shell's group, so an escapee
	// (setsid) outlives it even when it wrote the status, after the pipe
	// drain it held; and a runner that died without writing the status
	// (SIGKILL, an OOM kill) may have left the whole tree, reparented.
	leftovers := sweepDetached(p.id, d.leader)
	s.finishDetached(st, leftovers)
}

// sweepDetached kills what is left of a detached tree whose runner is
// gone and returns how many processes it found.
// Each process is counted as the scan kills it, so there is no group
// signal first (it would leave nothing to count).
func sweepDetached(id string, leader hostIdentity) int {
	k := newTreeKiller([]orphanTree{{id: id, leader: leader}})
	defer k.close()
	k.killRounds()
	k.wait(escapeeDeathWait)
	return k.found[0]
}

// finishDetached publishes the exit of a detached process.
func (s *supervisor) finishDetached(st *detachStatus, leftovers int) {
	p := s.p
	code, sigName := -1, ""
	var redactions int
	if st != nil {
		code, sigName, redactions = st.Code, st.Signal, int(min(max(st.Redactions, 0), 1<<31-1))
	}
	now := p.m.cfg.clock.Now("agentproc", "exit")
	// The follower shut the signal gate before this: the cause is final.
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
		info.Leftovers = leftovers
		info.Redactions = redactions
	})
	close(s.done)
	p.emitInfo(EventExited)
}

func readDetachStatus(dir int) *detachStatus {
	data, err := readAt(dir, "status", 4096)
	if err != nil {
		return nil
	}
	var st detachStatus
	if json.Unmarshal(data, &st) != nil {
		return nil
	}
	return &st
}

// segFollower copies new bytes of the segment files into buf, through
// the process's redaction: the runner redacted them with the secrets of
// the Manager that started it, and this Manager may know more (it adopted
// the process after a restart with other secrets); and the tree, which
// runs as the runner's user, can write its segment files itself.
type segFollower struct {
	dir      int // the output dir's descriptor
	segBytes int64
	buf      *outputBuffer
	red      *redactor // writes to buf
	seg      int64
	off      int64
	f        *os.File
	chunk    []byte
}

func newSegFollower(p *Process) *segFollower {
	f := &segFollower{dir: p.sup.det.outFD(), segBytes: p.sup.det.segBytes, buf: p.buf}
	f.red = p.redact.newRedactor(func(b []byte) { _, _ = f.buf.Write(b) })
	return f
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
			file, err := openAt(f.dir, segName(f.seg), os.O_RDONLY, 0)
			if err != nil {
				next, ok := f.oldestAfter(f.seg)
				if !ok {
					return
				}
				// What the redaction holds back came before the
				// gap: released first, it cannot join what follows.
				f.red.flush()
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
			f.red.write(f.chunk[:n])
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
	names, err := listAt(f.dir)
	if err != nil {
		return 0, false
	}
	best := int64(-1)
	for _, name := range names {
		n, err := strconv.ParseInt(strings.TrimPrefix(name, "seg-"), 10, 64)
		if err != nil || !strings.HasPrefix(name, "seg-") || n <= seg {
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

// signalDetached sends sig to a detached process's group, only after
// proving that the shell is still the recorded process (the pinned pidfd
// has not exited, or its start time and marker checked again): the runner
// reaps the shell and may outlive it by the pipe drain, and after that the
// PID can name anyone. It takes only the signal gate, and the Process's lock after
// a delivered signal.
func (s *supervisor) signalDetached(sig Signal) error {
	p := s.p
	d := s.det
	d.signalGate.Lock()
	defer d.signalGate.Unlock()
	if d.released {
		return ErrClosed
	}
	if d.shut || pidfd.Exited(d.runnerFD) || !d.leaderAlive(p.id) {
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
// everything carrying the marker, the grace period, then kill. A Close
// meanwhile does not let the process go (see releaseDetached): Stop returns
// with the exit within about the grace period whatever Close does.
func (s *supervisor) stopDetached(ctx context.Context, reason ExitReason) (Info, error) {
	p := s.p
	if !p.state.running() {
		return p.Info(), nil
	}
	// The reason is claimed under the signal gate, which the follower shuts before
	// the exit reads it.
	d := s.det
	d.signalGate.Lock()
	released, shut := d.released || d.releasing, d.shut
	if !shut && !released {
		p.state.claimStop(reason)
	}
	d.signalGate.Unlock()
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
	k.killRounds()
	select {
	case <-s.done:
		return p.Info(), ctx.Err()
	case <-d.ended:
		// The follower ended without publishing an exit (it failed to
		// watch the runner): nobody will.
		select {
		case <-s.done:
			return p.Info(), ctx.Err()
		default:
			return p.Info(), ErrClosed
		}
	case <-ctx.Done():
		return p.Info(), ctx.Err()
	}
}

// releaseDetached stops following a detached process without stopping it
// (Close): its supervisor ends and it runs on for the next Manager. A
// process whose Stop has begun is not let go: the stop ends it, and this
// waits for its exit to be published, so that Stop returns with the exit
// and Info does not say Running about a tree that is gone.
func (s *supervisor) releaseDetached() {
	d := s.det
	d.signalGate.Lock()
	stopping := s.p.state.stopping()
	if !stopping {
		d.releasing = true
	}
	d.signalGate.Unlock()
	if !stopping {
		d.once.Do(func() {
			var one [8]byte
			one[0] = 1
			_, _ = unix.Write(d.stopWake, one[:])
		})
	}
	<-d.ended
}

// adoptDetached makes the Process of a detached record left by a dead
// Manager: still running when its runner is alive (its exit is then
// watched like any other), else exited with the status the runner wrote.
func (m *Manager) adoptDetached(r *stateRecord) *Process {
	out, err := m.state.openOutDir(r.ID)
	if err != nil {
		m.cfg.logger.Warn(context.Background(), "open detached output", slog.F("id", r.ID), fieldError(err))
	}
	p := m.newDetachedProcess(r, 0, out)
	// This Manager's secrets: the request's are not known here, and
	// the runner redacted with them.
	p.redact = m.redactionFor(p, Request{}, nil)
	if r.Runner.PID > 0 && r.Runner.Boot == m.state.host.Boot {
		// Checked after pinning: a reused PID fails here.
		fd, ok := pidfd.Pin(r.Runner.PID, func() bool {
			id, ok := identityOf(r.Runner.PID)
			return ok && id.Start == r.Runner.Start
		})
		if ok && fd >= 0 {
			// Running: the caller starts superviseDetached once p is
			// registered.
			p.sup.det.runnerFD = fd
			p.sup.det.leaderFD = pinLeader(r.Leader, r.ID)
			return p
		}
	}
	// The runner is gone: what it wrote is all there is.
	_ = unix.Close(p.sup.det.stopWake)
	close(p.sup.det.ended)
	f := newSegFollower(p)
	f.follow()
	f.red.flush()
	f.close()
	st := readDetachStatus(p.sup.det.outFD())
	if out != nil {
		_ = out.Close()
	}
	code, sigName, reason := -1, "", ReasonOrphaned
	if !r.Exited && r.Leader.Boot == m.state.host.Boot {
		// The runner exited while no Manager followed it: what is left of
		// the tree (an escapee, or all of it if the runner died without a
		// status) is swept before the process is listed as exited.
		p.state.info.Leftovers = sweepDetached(r.ID, r.Leader)
	}
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
