package agentproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"cdr.dev/slog/v3"
	"github.com/google/uuid"
	"golang.org/x/xerrors"
)

// recoverOrphans runs once, in its own goroutine, when a Manager starts with a
// usable state dir. It reads every record, decides which belong to a dead
// Manager, stops the trees those left running (all at once: one grace
// period in total), lists them as exited processes of this Manager, and
// adopts the detached ones (see adoptDetached). entries is the listing of
// the records dir that New made before any Start of this Manager.
//
// A record is skipped, with a warning, when it cannot be parsed (it is
// renamed to ID.json.bad so it is not read again) or when its host is a
// different process that is still alive on this boot: whoever that is, it
// is not dead, and its trees are not ours to stop (detached processes are
// adopted all the same: that signals nothing). Holding the lock already
// means no live Manager uses the dir, so that second case is only a
// belt-and-braces check.
func (m *Manager) recoverOrphans(entries []string) {
	s := m.state
	defer close(s.recovered)
	ctx := context.Background()

	var recs []*stateRecord
	seen := make(map[string]bool)
	for _, name := range entries {
		if strings.HasPrefix(name, ".") {
			// A temporary file of a write a dead Manager did not finish
			// (the record it was replacing is still in place).
			_ = unlinkAt(s.procsFD, name)
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		rec, err := s.readRecord(name)
		if errors.Is(err, errFreeSlot) {
			// Nothing to recover, and a slot this Manager can use.
			s.freeSlot(name, false)
			continue
		}
		if err == nil && seen[rec.ID] {
			err = xerrors.Errorf("a second record of process %s", rec.ID)
		}
		if err != nil {
			s.logger.Warn(ctx, "skipping process record", slog.F("file", filepath.Join(s.dir, "procs", name)), fieldError(err))
			_ = renameAt(s.procsFD, name, name+".bad")
			continue
		}
		// A detached process is adopted whoever its host was: adopting
		// signals nothing, and holding the lock means its Manager closed.
		if !rec.Detached && rec.Host.Boot == s.host.Boot && rec.Host != s.host {
			if id, ok := identityOf(rec.Host.PID); ok && id == rec.Host {
				s.logger.Warn(ctx, "skipping record of a live host",
					slog.F("id", rec.ID), slog.F("host_pid", rec.Host.PID))
				continue
			}
		}
		seen[rec.ID] = true
		recs = append(recs, rec)
	}

	// Trees of this boot that were running when their Manager died. A
	// record of an earlier boot names nothing alive: the reboot ended it.
	var trees []orphanTree
	var treeOf []int // index into recs
	for i, r := range recs {
		if r.Exited || r.Detached || r.Host.Boot != s.host.Boot {
			continue
		}
		trees = append(trees, orphanTree{id: r.ID, leader: r.Leader, cgroup: r.Cgroup, parent: m.cfg.cgroupParent})
		treeOf = append(treeOf, i)
	}
	found := stopOrphans(trees, m.cfg.grace)
	leftovers := make([]int, len(recs))
	for j, i := range treeOf {
		leftovers[i] = found[j]
	}

	now := m.cfg.clock.Now("agentproc", "recover")
	procs := make([]*Process, 0, len(recs))
	for i, r := range recs {
		var p *Process
		if r.Detached {
			// Kept on purpose: adopted, running or not.
			p = m.adoptDetached(r)
		} else {
			if !r.Exited {
				r.Exited, r.ExitCode, r.Signal, r.Reason, r.ExitedAt = true, -1, "", ReasonOrphaned, now
			}
			p = m.recoveredProcess(r, leftovers[i])
		}
		// The record is this Manager's now: if it dies too, the next one
		// lists the process again instead of treating it as running.
		r.Manager, r.Host = m.instance, s.host
		if err := s.rewrite(r); err != nil {
			s.logger.Warn(ctx, "rewrite recovered record", slog.F("id", r.ID), fieldError(err))
		}
		procs = append(procs, p)
	}

	m.mu.Lock()
	for i, p := range procs {
		m.seq++
		p.seq = m.seq
		m.procs[p.id] = p
		if r := recs[i]; r.Detached {
			m.adoptKeyLocked(p, r.Owner, r.Key, r.KeyDigest)
		}
		if p.exited() {
			m.exitOrder = append(m.exitOrder, exitRecord{p, now})
		} else {
			m.running++
			m.wg.Add(1)
		}
	}
	m.reapLocked()
	m.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			// Adopted: subscribers learn of it as of a new start, and
			// then of its exit.
			p.emitInfo(EventStarted)
			go p.sup.superviseDetached()
		}
	}

	s.found = make([]Info, len(procs))
	for i, p := range procs {
		s.found[i] = p.Info()
	}
}

// maxRecordBytes bounds what is read of a record file: a slot is
// compacted past slotCompactBytes, so anything much larger was not written
// by this package.
const maxRecordBytes = 1 << 20

// readRecord reads and checks one record file. A record is untrusted input
// (another hand may have written it): every field that is acted on is
// checked, and paths are never taken from it.
func (s *stateDir) readRecord(name string) (*stateRecord, error) {
	data, err := readAt(s.procsFD, name, maxRecordBytes)
	if err != nil {
		return nil, err
	}
	// The first line is the record; each later one an update of some of
	// its fields, applied in order. A last line that does not parse was
	// cut short and is ignored, so the record is what it was before that
	// update.
	data = currentRecord(data)
	if len(data) == 0 {
		return nil, errFreeSlot
	}
	var r stateRecord
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	if err := json.Unmarshal(first, &r); err != nil {
		return nil, xerrors.Errorf("parse record: %w", err)
	}
	for line := range bytes.Lines(rest) {
		var u recordUpdate
		if err := json.Unmarshal(line, &u); err != nil {
			break
		}
		if u.Manager != "" {
			r.Manager = u.Manager
		}
		if u.Host != nil {
			r.Host = *u.Host
		}
		if u.Leader != nil {
			r.Leader = *u.Leader
		}
		if u.Runner != nil {
			r.Runner = *u.Runner
		}
		if u.Cgroup != "" {
			r.Cgroup = u.Cgroup
		}
		if u.Exited {
			r.Exited, r.ExitCode, r.Signal, r.Reason, r.ExitedAt = true, u.ExitCode, u.Signal, u.Reason, u.ExitedAt
		}
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	r.slot = name
	return &r, nil
}

// validate checks the fields recovery acts on.
func (r *stateRecord) validate() error {
	switch {
	case r.Version != stateRecordVersion:
		return xerrors.Errorf("record version %d, want %d", r.Version, stateRecordVersion)
	case !isProcessID(r.ID):
		// The ID names the output dir of a detached process and its log.
		return xerrors.Errorf("record names process %q, not an ID this package makes", r.ID)
	case r.Marker != MarkerEnv+"="+r.ID:
		return xerrors.Errorf("record marker %q does not match its ID", r.Marker)
	case r.Host.PID <= 0 || r.Host.Boot == "":
		return xerrors.New("record has no host")
	case r.Detached && r.SegBytes <= 0:
		return xerrors.Errorf("record has segments of %d bytes", r.SegBytes)
	}
	if err := checkRecordPID("leader", r.Leader.PID); err != nil {
		return err
	}
	return checkRecordPID("runner", r.Runner.PID)
}

// isProcessID reports whether id is a process ID as this package makes
// them: a UUID in its canonical form.
func isProcessID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// recoveredProcess makes the exited Process a recovered record stands for.
// It has no OS resources: every method that needs a running process sees
// it exited. Its output is whatever its output log holds.
func (m *Manager) recoveredProcess(r *stateRecord, leftovers int) *Process {
	code := r.ExitCode
	done := make(chan struct{})
	close(done)
	p := &Process{
		m:     m,
		id:    r.ID,
		owner: r.Owner,
		buf:   m.newBuffer(),
		sup:   &supervisor{done: done, escalated: make(chan struct{}), rec: r},
		state: handleState{info: Info{
			ID:         r.ID,
			Command:    r.Command,
			WorkDir:    r.WorkDir,
			Owner:      r.Owner,
			Background: r.Background,
			Warnings:   r.Warnings,
			PID:        r.Leader.PID,
			ExitCode:   &code,
			ExitSignal: r.Signal,
			Reason:     r.Reason,
			StartedAt:  r.StartedAt,
			ExitedAt:   r.ExitedAt,
			Leftovers:  leftovers,
		}},
	}
	p.sup.p = p
	// The log's path is derived from the checked ID under this Manager's
	// log dir, never read from the record, and the log is read only if it
	// is a regular file of ours (not through a symlink).
	if path := m.outputLogPath(r.ID); r.LogPath != "" && path != "" {
		p.state.info.LogPath = path
		p.sup.log = &outputLog{dir: m.logs, path: path}
		// Through this Manager's redaction too: the log was redacted as
		// it was written, but by the dead host's secrets.
		red := m.redactionFor(p, Request{}, nil).newRedactor(func(b []byte) { _, _ = p.buf.Write(b) })
		if err := copyFileIn(filepath.Dir(path), filepath.Base(path), red); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.cfg.logger.Warn(context.Background(), "read recovered output log", slog.F("path", path), fieldError(err))
		}
		red.flush()
	}
	p.buf.closeWrite()
	return p
}
