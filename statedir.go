package agentproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"cdr.dev/slog/v3"
	"github.com/google/uuid"
	"golang.org/x/xerrors"
)

// stateDir is a Manager's state directory. Its files:
//
//	dir/lock          flock'ed by the live Manager; holds its host's PID
//	dir/procs/ID.json one record per retained process
//	dir/out/ID/       a detached process's output and exit status
//
// The zero of everything but err is unusable; a nil *stateDir (no
// WithStateDir) records nothing, so callers need no checks.
type stateDir struct {
	dir string // absolute; for messages only: nothing is opened by path
	// dirFD, procsFD and outFD are the checked descriptors of dir,
	// dir/procs and dir/out (see statedir_fs_linux.go); -1 when not open.
	dirFD, procsFD, outFD int
	err                   error // non-nil: the dir cannot be used; Start returns it
	lock                  *os.File
	host                  hostIdentity
	logger                slog.Logger
	hostGuard             *hostGuard // nil where there is none (not Linux)

	recovered chan struct{} // closed when recovery has finished
	found     []Info        // what recovery found; read after recovered
	recErr    error

	// fs bounds every call that may wait on the dir's disk: removals are
	// queued on it and Close waits for them at most its bound (the same
	// primitive as the output log's, see fsbound.go).
	fs fsBound

	mu sync.Mutex // guards the fields below; never held for FS work
	// slotOf maps a process ID to its record file's name in procs; free
	// lists empty record files open for reuse (see create).
	slotOf  map[string]string
	free    []freeSlot
	closing bool // close has begun: freed slots are deleted, not kept
	// released is set once close has closed the descriptors: nothing
	// touches the dir after that (a closed descriptor's number may name
	// another file of the process by then).
	released bool

	closeOnce sync.Once
}

// hostIdentity names one process on one boot, so that a PID reused by
// another process, or the same PID after a reboot, is not mistaken for it.
// start is the process's start time in clock ticks since boot (Linux:
// field 22 of /proc/PID/stat).
type hostIdentity struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	Boot  string `json:"boot_id"`
}

// stateRecord is one record file. Version 1.
type stateRecord struct {
	Version    int      `json:"version"`
	ID         string   `json:"id"`
	Owner      string   `json:"owner,omitempty"`
	Command    string   `json:"command"`
	WorkDir    string   `json:"workdir"`
	Key        string   `json:"key,omitempty"`
	Background bool     `json:"background,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
	Marker     string   `json:"marker"` // MarkerEnv=ID
	// LogPath only says that the process had an output log: a reader
	// derives the log's path from the ID, never takes it from here.
	LogPath string `json:"log_path,omitempty"`
	// KeyDigest identifies the request that took Key (see keyDigest), so
	// that a Manager that adopts the process can answer a retried Start
	// without keeping the request's environment on disk.
	KeyDigest string `json:"key_digest,omitempty"`
	Detached  bool   `json:"detached,omitempty"`
	// SegBytes is the size of a detached process's output segments.
	SegBytes int64 `json:"seg_bytes,omitempty"`
	// Sandbox is how a detached process is confined (Info.Sandbox).
	Sandbox *Confinement `json:"sandbox,omitempty"`
	// Runner is a detached process's runner (see detach_linux.go).
	Runner    hostIdentity `json:"runner,omitzero"`
	StartedAt time.Time    `json:"started_at"`
	// Leader is the shell; zero until it runs. Its PID is the process
	// group ID.
	Leader hostIdentity `json:"leader"`
	Cgroup string       `json:"cgroup,omitempty"`
	// Manager and Host name the Manager that started the process.
	Manager string       `json:"manager"`
	Host    hostIdentity `json:"host"`

	// Set at exit.
	Exited   bool       `json:"exited,omitempty"`
	ExitCode int        `json:"exit_code,omitempty"`
	Signal   string     `json:"signal,omitempty"`
	Reason   ExitReason `json:"reason,omitempty"`
	ExitedAt time.Time  `json:"exited_at,omitzero"`

	// file is the open record while the process runs (see create); slot
	// is the record file's name in dir/procs.
	file *os.File
	slot string
}

const stateRecordVersion = 1

// openStateDir prepares dir for a Manager: it creates it (0700) or checks
// that the existing dir is private (owned by the effective user, not
// writable by group or others), opens procs/ and out/ in it the same way,
// checks it is writable and takes its lock. Every failure is kept in err,
// naming the dir and the reason, for Start to return; a dir that fails the
// check is not read, written or removed from.
func openStateDir(dir string, logger slog.Logger, bound time.Duration) *stateDir {
	s := &stateDir{dir: dir, dirFD: -1, procsFD: -1, outFD: -1, logger: logger,
		recovered: make(chan struct{}), slotOf: make(map[string]string), fs: fsBound{bound: bound}}
	fail := func(reason string, err error) *stateDir {
		s.err = xerrors.Errorf(prefixFor(err)+"state dir %q %s: %w", dir, reason, err)
		if s.lock != nil {
			unlockStateDir(s.lock)
			s.lock = nil
		}
		s.closeFDs()
		close(s.recovered)
		return s
	}
	if err := stateSupported(); err != nil {
		return fail("unusable", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fail("unusable", err)
	}
	s.dir = abs
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fail("cannot be created", err)
	}
	if s.dirFD, err = openPrivateDir(abs); err != nil {
		return fail("is refused", err)
	}
	if s.procsFD, err = openPrivateSubdir(s.dirFD, abs, "procs"); err != nil {
		return fail("is refused", err)
	}
	if s.outFD, err = openPrivateSubdir(s.dirFD, abs, "out"); err != nil {
		return fail("is refused", err)
	}
	host, err := selfIdentity()
	if err != nil {
		return fail("unusable: cannot identify this process", err)
	}
	s.host = host
	lock, err := lockStateDir(s.dirFD)
	if err != nil {
		return fail("is not usable", err)
	}
	s.lock = lock
	// Written after the lock is held: it only helps a person (or the error
	// of a second Manager) see who holds it.
	if err := lock.Truncate(0); err != nil {
		return fail("is not writable", err)
	}
	if _, err := lock.WriteAt([]byte(strconv.Itoa(host.PID)+"\n"), 0); err != nil {
		return fail("is not writable", err)
	}
	// A probe write shows a read-only dir now rather than at the first
	// Start.
	probe := ".probe-" + uuid.NewString()
	f, err := openAt(s.procsFD, probe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fail("is not writable", err)
	}
	_ = f.Close()
	_ = unlinkAt(s.procsFD, probe)
	return s
}

// closeFDs closes the dir's descriptors.
func (s *stateDir) closeFDs() {
	for _, fd := range []*int{&s.outFD, &s.procsFD, &s.dirFD} {
		closeFD(*fd)
		*fd = -1
	}
}

// newRecord returns the record of a process about to start.
func (s *stateDir) newRecord(m *Manager, id, owner, command, dir string, req Request, warnings []string, logPath string) *stateRecord {
	if s == nil {
		return nil
	}
	return &stateRecord{
		Version:    stateRecordVersion,
		ID:         id,
		Owner:      owner,
		Command:    command,
		WorkDir:    m.shownWorkDir(req, owner, dir),
		Key:        req.Key,
		Background: req.Background,
		Warnings:   warnings,
		Marker:     MarkerEnv + "=" + id,
		LogPath:    logPath,
		KeyDigest:  keyDigest(req),
		StartedAt:  m.cfg.clock.Now("agentproc", "record"),
		Manager:    m.instance,
		Host:       s.host,
	}
}

// rewrite appends to r's record file the fields a recovering or adopting
// Manager changes: the new owner (Manager, Host) and the exit. Like every
// update it is one appended line, never a replace (see create).
func (s *stateDir) rewrite(r *stateRecord) error {
	u := recordUpdate{Manager: r.Manager, Host: &r.Host}
	if r.Exited {
		u.Exited, u.ExitCode, u.Signal, u.Reason, u.ExitedAt = true, r.ExitCode, r.Signal, r.Reason, r.ExitedAt
	}
	f, err := openAt(s.procsFD, r.slot, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return xerrors.Errorf("state dir %q: update record: %w", s.dir, err)
	}
	r.file = f
	err = s.appendUpdate(r, u)
	r.file = nil
	if cerr := f.Close(); err == nil && cerr != nil {
		err = xerrors.Errorf("state dir %q: update record: %w", s.dir, cerr)
	}
	if err == nil {
		s.mu.Lock()
		s.slotOf[r.ID] = r.slot
		s.mu.Unlock()
	}
	return err
}

// create writes the record of a process about to start, as one JSON line,
// into a slot: a record file whose last process was dropped (see
// freeSlot). The file stays open (append-only) for the updates.
//
// Slots are reused rather than a file being created per process, and
// updates are appended rather than the file replaced, because creating and
// renaming files are metadata operations that wait on the file system's
// journal, twice per Start+Wait in BenchmarkStateDir/StartWait, while
// writing to a file that exists does not wait on it (docs/measurements.md
// has both costs). A new slot is created only when every slot holds a
// retained process.
//
// No write needs a temporary file: the child is started only after this
// write has returned, so a slot that is empty or cut short can only be
// left by a host that died before starting anything. A line under a page
// is written by one write call, which the death of this process cannot
// tear; a reader still ignores a last line that does not parse.
func (s *stateDir) create(r *stateRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return xerrors.Errorf("encode record of %s: %w", r.ID, err)
	}
	s.mu.Lock()
	var slot freeSlot
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	}
	s.mu.Unlock()
	if slot.f == nil {
		slot.name = "slot-" + uuid.NewString() + ".json"
		slot.f, err = openAt(s.procsFD, slot.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return xerrors.Errorf("state dir %q: create record: %w", s.dir, err)
		}
	}
	if _, err := slot.f.Write(append(data, '\n')); err != nil {
		_ = slot.f.Close()
		_ = unlinkAt(s.procsFD, slot.name)
		return xerrors.Errorf("state dir %q: write record: %w", s.dir, err)
	}
	r.file, r.slot = slot.f, slot.name
	s.mu.Lock()
	s.slotOf[r.ID] = r.slot
	s.mu.Unlock()
	return nil
}

// freeSlot is an empty record file, open for appending.
type freeSlot struct {
	name string // in dir/procs
	f    *os.File
}

// slotTombstone ends the record before it in a slot file; slotCompactBytes
// is the size past which a freed slot is truncated.
const (
	slotTombstone    = "{\"dropped\":true}\n"
	slotCompactBytes = 64 << 10
)

// currentRecord returns the part of a slot file after its last tombstone:
// the record it holds now, or nothing for a free slot.
func currentRecord(data []byte) []byte {
	if i := bytes.LastIndex(data, []byte(slotTombstone)); i >= 0 {
		return data[i+len(slotTombstone):]
	}
	return data
}

// maxFreeSlots bounds the empty record files kept open for reuse; beyond
// it a freed slot is deleted.
const maxFreeSlots = 64

// guard is the dir's host guard, nil without one.
func (s *stateDir) guard() *hostGuard {
	if s == nil {
		return nil
	}
	return s.hostGuard
}

// abandon removes the record of a process that was never started.
func (s *stateDir) abandon(r *stateRecord) {
	if s == nil || r == nil {
		return
	}
	if r.file != nil {
		_ = r.file.Close()
		r.file = nil
	}
	s.hostGuard.remove(r.ID)
	s.remove(r.ID)
}

// recordUpdate is one appended line: the fields that change after the
// record is created.
type recordUpdate struct {
	Manager  string        `json:"manager,omitempty"`
	Host     *hostIdentity `json:"host,omitempty"`
	Leader   *hostIdentity `json:"leader,omitempty"`
	Runner   *hostIdentity `json:"runner,omitempty"`
	Cgroup   string        `json:"cgroup,omitempty"`
	Exited   bool          `json:"exited,omitempty"`
	ExitCode int           `json:"exit_code,omitempty"`
	Signal   string        `json:"signal,omitempty"`
	Reason   ExitReason    `json:"reason,omitempty"`
	ExitedAt time.Time     `json:"exited_at,omitzero"`
}

// appendUpdate adds u to r's open record file.
func (s *stateDir) appendUpdate(r *stateRecord, u recordUpdate) error {
	if r.file == nil {
		return xerrors.Errorf("state dir %q: record of %s is not open", s.dir, r.ID)
	}
	data, err := json.Marshal(u)
	if err != nil {
		return xerrors.Errorf("encode record update of %s: %w", r.ID, err)
	}
	if _, err := r.file.Write(append(data, '\n')); err != nil {
		return xerrors.Errorf("state dir %q: update record: %w", s.dir, err)
	}
	return nil
}

// dropLocked queues the removal of a record; the caller holds Manager.mu,
// so the file is removed by the dir's queue (see fsBound).
func (s *stateDir) dropLocked(id string) {
	if s == nil || s.err != nil {
		return
	}
	s.fs.enqueue(func() { s.remove(id) })
}

// remove empties a process's record slot (keeping it for reuse, or
// deleting it when enough are kept) and, for a detached process, deletes
// its output files (the directory is simply absent for the others).
func (s *stateDir) remove(id string) {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return
	}
	slot := s.slotOf[id]
	delete(s.slotOf, id)
	s.mu.Unlock()
	if slot != "" {
		s.freeSlot(slot, true)
	}
	// Relative to the checked out/ and without following symlinks; the ID
	// is one this Manager made or a record's, checked to be a UUID.
	if err := removeAllAt(s.outFD, id); err != nil {
		s.logger.Warn(context.Background(), "remove detached output", slog.F("id", id), fieldError(err))
	}
}

// freeSlot empties the record file name in procs and lists it as free, or
// deletes it when maxFreeSlots are listed or the dir is closing.
//
// A slot is emptied by appending a tombstone line, not by truncating it:
// on ext4 a truncate frees blocks through the journal (tens of
// microseconds), an append is a page-cache write. Readers take only what
// follows the last tombstone (see currentRecord). A slot grown past
// slotCompactBytes is truncated when freed, once every few dozen uses.
func (s *stateDir) freeSlot(name string, tombstone bool) {
	f, err := openAt(s.procsFD, name, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		if tombstone {
			_, err = f.WriteString(slotTombstone)
		}
		if st, serr := f.Stat(); err == nil && serr == nil && st.Size() > slotCompactBytes {
			err = f.Truncate(0)
		}
		if err == nil {
			s.mu.Lock()
			if len(s.free) < maxFreeSlots && !s.closing {
				s.free = append(s.free, freeSlot{name, f})
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
		}
		_ = f.Close()
	}
	if err := unlinkAt(s.procsFD, name); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logger.Warn(context.Background(), "remove process record", slog.F("file", name), fieldError(err))
	}
}

// close removes the records of ids (the Manager's processes, all exited)
// and releases the lock, after the queued removals: the next Manager on the
// dir then recovers only what this one left running on purpose. Empty
// slots are left for it. The work is the last job of the dir's queue, and
// close waits for it at most the queue's bound: a hung disk does not hold
// Close, and the lock is released when the work is done, whenever that is.
func (s *stateDir) close(ids []string) {
	if s == nil || s.err != nil {
		return
	}
	<-s.recovered
	s.closeOnce.Do(func() {
		s.hostGuard.close()
		s.fs.enqueue(func() {
			for _, id := range ids {
				s.remove(id)
			}
			s.mu.Lock()
			s.closing = true
			free := s.free
			s.free = nil
			s.mu.Unlock()
			for _, f := range free {
				_ = f.f.Close()
			}
			unlockStateDir(s.lock)
			s.mu.Lock()
			s.released = true
			s.mu.Unlock()
			s.closeFDs()
		})
		if !s.fs.waitIdle() {
			s.logger.Warn(context.Background(), "state dir: records not removed within the bound; the lock is released once they are",
				slog.F("dir", s.dir), slog.F("bound", s.fs.bound))
		}
	})
}

// Recovered waits until the recovery that New started has finished and
// returns the Info of every process it found: trees a dead Manager left
// running (stopped now, with ReasonOrphaned) and processes that had exited
// before it died (with the reason recorded then). They are also listed by
// List and Get until retention drops them. Without WithStateDir it returns
// nil, nil; with an unusable dir, the dir's error. If ctx ends first it
// returns ctx.Err(); recovery goes on.
func (m *Manager) Recovered(ctx context.Context) ([]Info, error) {
	s := m.state
	if s == nil {
		return nil, nil
	}
	select {
	case <-s.recovered:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, s.err
	}
	infos := make([]Info, len(s.found))
	copy(infos, s.found)
	return infos, s.recErr
}

// openState is New's hook: it opens the state dir, starts the host guard
// and recovery. Only the lock and the host guard's start run before New returns.
func (m *Manager) openState() {
	m.instance = uuid.NewString()
	s := openStateDir(m.cfg.stateDir, m.cfg.logger, m.cfg.logDirBound)
	m.state = s
	if s.err != nil {
		return
	}
	g, err := startHostGuard(func(err error) { m.cfg.logger.Warn(context.Background(), "guard", fieldError(err)) })
	if err != nil {
		s.err = xerrors.Errorf(prefixFor(err)+"state dir %q: %w", s.dir, err)
		unlockStateDir(s.lock)
		s.closeFDs()
		close(s.recovered)
		return
	}
	s.hostGuard = g
	// The records are listed before New returns, so recovery never looks
	// at the record of a process this Manager starts meanwhile (it could
	// catch one between its creation and its first write). Listing is one
	// getdents; the slow part, stopping trees, runs in the background.
	entries, err := listAt(s.procsFD)
	if err != nil {
		s.recErr = xerrors.Errorf(prefixFor(err)+"state dir %q: read records: %w", s.dir, err)
		close(s.recovered)
		return
	}
	go m.recoverOrphans(entries)
}

// recovered is closed once recovery has registered every process it adopts;
// Shutdown waits for it (bounded by its ctx) before it looks at what runs.
func (m *Manager) recovered() <-chan struct{} {
	if m.state == nil {
		return closedChan
	}
	return m.state.recovered
}

// validateDetach checks what Request.Detach needs.
func (m *Manager) validateDetach(req Request) error {
	if !req.Detach {
		return nil
	}
	if err := detachSupported(); err != nil {
		return xerrors.Errorf("detach: %w", err) // ErrUnsupported names the package
	}
	switch {
	case m.state == nil:
		return xerrors.Errorf("detach needs WithStateDir: %w", ErrInvalidRequest)
	case req.Stdin || req.TTY != nil:
		return xerrors.Errorf("a detached process cannot have a stdin or a terminal: %w", ErrInvalidRequest)
	case req.Timeout != 0 || req.IdleTimeout != 0 || req.MaxOutput != 0:
		// Each is enforced by the Manager, which a detached process
		// outlives.
		return xerrors.Errorf("a detached process cannot have a timeout, an idle timeout or an output limit: %w", ErrInvalidRequest)
	case req.Limits != (Limits{}):
		// Limits hold through the tree's cgroup, which a detached process
		// does not get (req.Limits includes WithLimits' defaults here).
		return xerrors.Errorf("detach: limits cannot be enforced on a detached process: %w", ErrUnsupported)
	}
	return nil
}

// usable returns the dir's error, if any, for Start.
func (s *stateDir) usable() error {
	if s == nil {
		return nil
	}
	return s.err
}

// recordStarting stores the record of a process about to start and lists
// it with the guard, so that even a host that dies before the shell's PID
// is known leaves nothing running: the guard finds the tree by its marker
// and cgroup, and its process group through a leader that carries the
// marker. recordRunning tells it the leader too, so that it can kill the
// group before scanning /proc.
func (s *stateDir) recordStarting(r *stateRecord, cgroup string) error {
	if s == nil {
		return nil
	}
	if err := s.create(r); err != nil {
		return err
	}
	s.hostGuard.add(r.ID, hostIdentity{}, cgroup)
	return nil
}

// recordRunning adds the leader and the cgroup once the shell runs. The
// supervisor calls it first thing, so that reading the leader's start time
// overlaps the child's start instead of lengthening Start. A failed write
// is logged, not fatal: the process runs already, and the first record's
// marker still lets a new Manager find the tree.
func (sv *supervisor) recordRunning() {
	s, r := sv.p.m.state, sv.rec
	if s == nil || r == nil {
		return
	}
	pid, cgroup := sv.cmd.Process.Pid, sv.ctr.cgroupDir()
	// The shell is not reaped before this returns (the supervisor waits
	// for it afterwards), so its stat is there even if it has exited.
	if id, _, ok := statIdentity(pid); ok {
		r.Leader = id
	} else {
		r.Leader = hostIdentity{PID: pid}
	}
	r.Cgroup = cgroup
	// The guard can then kill the group at once, before its /proc scan.
	s.hostGuard.add(r.ID, r.Leader, cgroup)
	if err := s.appendUpdate(r, recordUpdate{Leader: &r.Leader, Cgroup: cgroup}); err != nil {
		s.logger.Warn(context.Background(), "update process record", slog.F("id", r.ID), fieldError(err))
	}
}

// recordExit is the supervisor's hook, called after the tree is gone and
// before the exit is published, so that a record is never rewritten after
// retention removed it.
func (sv *supervisor) recordExit(code int, sigName string, reason ExitReason, now time.Time) {
	s := sv.p.m.state
	if s == nil || sv.rec == nil {
		return
	}
	r := sv.rec
	r.Exited, r.ExitCode, r.Signal, r.Reason, r.ExitedAt = true, code, sigName, reason, now
	if r.Cgroup != "" {
		// The cgroups outlive the tree until removeCgroups deletes them:
		// listed on, without the leader (reaped, so its PID may name
		// another process), so that a host that dies meanwhile leaves none
		// behind.
		s.hostGuard.add(r.ID, hostIdentity{}, r.Cgroup)
	} else {
		s.hostGuard.remove(r.ID)
	}
	err := s.appendUpdate(r, recordUpdate{Exited: true, ExitCode: code, Signal: sigName, Reason: reason, ExitedAt: now})
	if err != nil {
		s.logger.Warn(context.Background(), "update process record", slog.F("id", r.ID), fieldError(err))
	}
	if r.file != nil {
		_ = r.file.Close()
		r.file = nil
	}
}

// closeState is Close's hook, run once every process has exited: it
// removes their records and releases the dir.
func (m *Manager) closeState() {
	s := m.state
	if s == nil || s.err != nil {
		return
	}
	<-s.recovered
	m.mu.Lock()
	ids := make([]string, 0, len(m.procs))
	for id, p := range m.procs {
		if p.sup.det != nil && !p.exited() {
			continue // kept for the next Manager
		}
		ids = append(ids, id)
	}
	m.mu.Unlock()
	s.close(ids)
}

// outputLogPath is where logDir.open will put the log of process id, or
// "" without WithOutputLog.
func (m *Manager) outputLogPath(id string) string {
	if m.state == nil || m.logs.path == "" {
		return ""
	}
	return logPath(m.logs.path, id)
}
