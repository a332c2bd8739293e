package agentproc

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/xerrors"
)

// The sandbox's part of a Start, in the order spawn uses it:
// prepareSandbox builds (or finds) the policy's enforcement, makes the
// private temp dir and decides the warnings; buildEnv filters the
// environment through it; start forks the shell confined; the supervisor's
// release removes the temp dir once the tree is gone.
//
// The OS layer it calls (sandboxSupport, sandboxCache, sandboxBuilt,
// recycleTempDir, ...) is listed once, with what each must guarantee, in
// platform.go ("Sandbox").

// managerSandbox is a Manager's sandbox: the built policies and the parent of
// the private temp dirs, made on first use and removed by Close.
type managerSandbox struct {
	cache sandboxCache

	tmpMu     sync.Mutex
	tmpParent string
	tmpErr    error
	// threadUser releases this Manager's use of the starting threads'
	// shared state (sandboxThreadUser), taken by its first sandboxed
	// Start; nil before that and after close.
	threadUser func()
	// emptyDirs holds empty temp dirs ready for the next Start: those finished
	// processes left empty, under a new name (finish), and, when a Start
	// found none, one made ahead off the Start path. A mkdir and its rmdir
	// measured many times the rename and the check (docs/measurements.md).
	// refills counts the goroutines making them, and those letting go of
	// what the OS layer held for a finished tree (sandboxRun.release),
	// which close waits for.
	emptyDirs chan string
	refills   sync.WaitGroup

	// policies caches sandboxPolicyFor's answers by rawPolicyKey: resolving
	// the paths costs a lstat per path component, a few hundred
	// microseconds for WorkspaceSandbox's list, on every Start otherwise.
	// A link changed later is thus not followed again, as the built
	// ruleset would not be either, but for a link or directory made in a
	// hidden directory (or a missing hidden path made), which hides
	// watches: that policy is resolved again.
	polMu    sync.Mutex
	policies map[string]*sandboxPolicy
	// hides tells which cached policies a link made in a hidden
	// directory since their walk has made stale (hideWatch).
	hides hideWatch
}

// afterPolicyResolve, if not nil, runs after cachedPolicy resolves a
// policy and before it keeps it (tests: a change drained meanwhile).
var afterPolicyResolve func()

// maxCachedPolicies bounds the policy cache; a server whose requests use
// ever new work dirs starts over when it is full.
const maxCachedPolicies = 256

// cachedPolicy returns the policy of sb for a Start in dir, resolved once.
func (m *Manager) cachedPolicy(sb *Sandbox, dir, parent string, dirChosen, tty bool) (*sandboxPolicy, error) {
	raw := rawPolicyKey(sb, dir, parent, dirChosen, tty)
	s := &m.sandbox
	// A link made in a hidden directory after a policy's walk: that
	// policy is resolved again, and the link's target hidden from this
	// Start on (TestHiddenDirLinkAddedLater). Nothing changed: one read
	// that finds nothing.
	stale, all := s.hides.changed()
	s.polMu.Lock()
	if all {
		s.policies = nil
	}
	for _, k := range stale {
		delete(s.policies, k)
	}
	pol := s.policies[raw]
	s.polMu.Unlock()
	if pol != nil {
		return pol, nil
	}
	// A change a concurrent Start drains while this one resolves (after
	// the walk registered a directory, before the policy is kept) drops
	// the registration with it, and would leave this policy kept stale,
	// and unwatched there, for the cache's life: a change seen since
	// gen keeps it out of the cache, resolved again at its next Start.
	gen := s.hides.generation()
	pol, err := m.resolvePolicy(sb, dir, parent, dirChosen, tty, func(d string) bool { return s.hides.watch(raw, d) })
	if afterPolicyResolve != nil {
		afterPolicyResolve()
	}
	if err != nil || pol.unwatched {
		if s.hides.filled() {
			// The Manager's watches are at their bound
			// (maxHideWatches): start over, as when the cache is full,
			// rather than resolve every later policy at each Start.
			s.polMu.Lock()
			s.policies = nil
			s.hides.reset()
			s.polMu.Unlock()
		}
		return pol, err // not kept where a change could go unseen
	}
	s.polMu.Lock()
	defer s.polMu.Unlock()
	switch {
	case s.hides.generation() != gen:
		// A drain or a reset (another Start's start-over) dropped
		// this policy's registrations while it was resolved.
		return pol, nil
	case s.policies == nil:
		s.policies = map[string]*sandboxPolicy{}
	case len(s.policies) >= maxCachedPolicies:
		// Start over, the watch's registrations too; this policy is
		// resolved (and registered) again at its next Start.
		s.policies = nil
		s.hides.reset()
		return pol, nil
	}
	s.policies[raw] = pol
	return pol, nil
}

// rawPolicyKey names what sandboxPolicyFor's answer depends on, without a
// system call.
func rawPolicyKey(sb *Sandbox, dir, parent string, dirChosen, tty bool) string {
	// Written piece by piece (no concatenation): this runs on every Start.
	n := len(dir) + len(parent) + 32
	lists := [][]string{sb.Write, sb.Read, sb.Hide, sb.ReadOnly, sb.bound, sb.readBound}
	for _, l := range lists {
		for _, p := range l {
			n += len(p) + 1
		}
	}
	var b strings.Builder
	b.Grow(n)
	var num [20]byte
	for _, l := range lists {
		b.Write(strconv.AppendInt(num[:0], int64(len(l)), 10))
		if l == nil {
			b.WriteByte('n')
		}
		for _, p := range l {
			b.WriteByte(0)
			b.WriteString(p)
		}
		b.WriteByte(1)
	}
	b.WriteString(string(sb.network()))
	for _, p := range sb.AllowPorts {
		b.WriteByte(',')
		b.Write(strconv.AppendInt(num[:0], int64(p), 10))
	}
	for _, h := range sb.AllowHosts {
		b.WriteByte(0)
		b.WriteString(h)
	}
	for _, s := range []string{dir, parent} {
		b.WriteByte(1)
		b.WriteString(s)
	}
	b.WriteByte(1)
	for _, f := range []bool{tty, sb.NoDefaultWrite, sb.BestEffort, dirChosen} {
		b.Write(strconv.AppendBool(num[:0], f))
	}
	return b.String()
}

// tempParent returns the directory the private temp dirs are made in, one
// per Manager, in tempParentBase. The OS layer holds each tree to its own
// dir there (sandboxStart.tmp).
func (s *managerSandbox) tempParent() (string, error) {
	s.tmpMu.Lock()
	defer s.tmpMu.Unlock()
	if s.tmpParent == "" && s.tmpErr == nil {
		s.tmpParent, s.tmpErr = os.MkdirTemp(tempParentBase(), "agentproc-sandbox-")
		s.emptyDirs = make(chan string, maxEmptyTempDirs)
		if s.tmpErr == nil {
			parent := s.tmpParent
			s.cache.supplyTemps(parent, func() (string, error) { return s.tempDir(parent) }, func(d string) {
				_ = s.dropTempDir(d, true) // a ready thread's, unused: no tree ran in it
			})
		}
	}
	return s.tmpParent, s.tmpErr
}

// useThreads registers the Manager, once and until close, as a user of
// what the starting threads share (sandboxThreadUser).
func (s *managerSandbox) useThreads() {
	s.tmpMu.Lock()
	defer s.tmpMu.Unlock()
	if s.threadUser == nil && s.tmpErr != ErrClosed {
		s.threadUser = sandboxThreadUser()
	}
}

// maxEmptyTempDirs bounds how many empty temp dirs wait for a Start: enough
// that a burst of that many sandboxed Starts finds the dirs the last one
// left, for an empty directory each (one inode and, on ext4, one 4 KiB
// block) until Close. A burst that makes and removes its own pays a mkdir
// that scans the file system's recently deleted inodes: with 4 kept, the
// cost per Start grew with the burst (BenchmarkSandboxBurst,
// docs/measurements.md).
const maxEmptyTempDirs = 256

// tempDir returns an empty private temp dir in parent (from tempParent): a
// kept one (emptyDirs) when there is one, else a new one, and then it
// starts making one for the next Start, since more Starts run at once than processes
// finish.
func (s *managerSandbox) tempDir(parent string) (string, error) {
	s.tmpMu.Lock()
	dirs, closed := s.emptyDirs, s.tmpErr != nil
	s.tmpMu.Unlock()
	if closed {
		return "", ErrClosed
	}
	select {
	case d := <-dirs:
		return d, nil
	default:
	}
	s.tmpMu.Lock()
	if s.tmpErr == nil {
		s.refills.Add(1)
		go func() {
			defer s.refills.Done()
			if d, err := os.MkdirTemp(parent, "t-"); err == nil {
				s.offerEmptyDir(d)
			}
		}()
	}
	s.tmpMu.Unlock()
	return os.MkdirTemp(parent, "t-")
}

// offerEmptyDir keeps the empty temp dir d for a later Start, or removes it
// when enough are waiting.
func (s *managerSandbox) offerEmptyDir(d string) {
	s.tmpMu.Lock()
	dirs := s.emptyDirs
	s.tmpMu.Unlock()
	select {
	case dirs <- d:
	default:
		_ = os.Remove(d)
	}
}

// dropTempDir removes the temp dir of a finished process from its path:
// when reuse says no process of the tree can be left, the process left it
// empty and as it was made, and another empty dir is wanted, by renaming
// it (recycleTempDir) and keeping it for a later Start; otherwise by
// removing it and what it holds. A rename keeps the inode, which a
// leftover of the tree (one that shed the marker with env -i and left
// the session: found by no sweep without a cgroup) still reaches through
// its namespace's bind or its Landlock rule: it read the files of the
// later tree the dir was handed to (TestAttackLeftoverReadsNextTempDir).
func (s *managerSandbox) dropTempDir(dir string, reuse bool) error {
	s.tmpMu.Lock()
	dirs, open := s.emptyDirs, s.tmpErr == nil
	s.tmpMu.Unlock()
	if reuse && open && len(dirs) < cap(dirs) {
		at, ok := recycleTempDir(dir)
		if ok {
			s.offerEmptyDir(at)
			return nil
		}
		dir = at
	}
	return removeTree(dir)
}

// close releases the built policies and removes the temp dirs' parent.
func (s *managerSandbox) close() {
	s.cache.close()
	s.hides.close()
	s.tmpMu.Lock()
	dir, user := s.tmpParent, s.threadUser
	s.tmpParent, s.tmpErr, s.threadUser = "", ErrClosed, nil
	s.tmpMu.Unlock()
	if user != nil {
		user()
	}
	s.refills.Wait()
	if dir != "" {
		_ = removeTree(dir)
	}
}

// sandboxRun is one Start's sandbox.
type sandboxRun struct {
	built    *sandboxBuilt
	env      SandboxEnv
	tmpDir   string
	info     *Confinement
	warnings []string
	hosts    *hostsRun      // NetworkHosts only
	pol      *sandboxPolicy // what inferFileDenials checks paths against
	// ready is the thread made ahead for this Start (sandboxBuilt.takeReady),
	// handed to start or discarded; nil without.
	ready *readyThread
	// release lets go of what the OS layer held for the tree
	// (sandboxStart.hold); nil without.
	release func()
	// mountns is the tree's own mount namespace, which the tree cannot
	// leave (as root on Linux: sandboxStart.hold); zero without.
	mountns treeNamespace
}

// treeNamespace names a namespace by the inode of its nsfs file (there
// is one nsfs, so the inode alone names it), which stays its own while a
// descriptor of it is held (the Start's hold keeps one until the tree's
// containment has swept). The zero value is no namespace.
type treeNamespace struct{ ino uint64 }

// sandboxStart is what one Start hands sandboxBuilt.start besides cmd.
type sandboxStart struct {
	step  threadStep          // runs on the starting thread first; nil: none
	ready *readyThread        // made ahead for this Start (takeReady); nil: none
	tmp   string              // the tree's private temp dir; "" without
	hosts func(hostsListener) // takes over the proxy listener the thread made; nil: none
	// hold, when not nil, keeps what must outlive the tree's end (as root
	// its own mount namespace, named by ns) and release lets go of it,
	// which the Start calls once the tree is gone.
	hold func(ns treeNamespace, release func())
}

// prepareSandbox makes what a Start of sb in dir needs (dirChosen: the
// request named dir, see sandboxPolicyFor); nil sb gives nil.
// Nothing is left behind when it fails.
func (m *Manager) prepareSandbox(sb *Sandbox, owner, dir string, dirChosen, tty bool) (*sandboxRun, error) {
	if sb == nil {
		return nil, nil
	}
	m.sandbox.useThreads()
	// Made for every policy, NoDefaultWrite's too: the OS layer hides it
	// from trees that have no temp dir in it, and it must exist before the
	// first policy is built.
	p, err := m.sandbox.tempParent()
	if err != nil {
		return nil, xerrors.Errorf("agentproc: sandbox temp dir: %w", err)
	}
	var parent string
	if !sb.NoDefaultWrite {
		parent = p
	}
	pol, err := m.cachedPolicy(sb, dir, parent, dirChosen, tty)
	if err != nil {
		return nil, err
	}
	built, err := m.sandbox.cache.get(pol)
	if err != nil {
		return nil, xerrors.Errorf(prefixFor(err)+"build sandbox: %w", err)
	}
	warnings, err := checkUnenforced(pol, built.missing)
	if err != nil {
		built.done()
		return nil, err
	}
	run := &sandboxRun{built: built, env: sb.Env, warnings: warnings, pol: pol}
	info := built.info
	info.Mechanisms = append([]string(nil), built.info.Mechanisms...)
	// A ready thread made for the policy comes with the temp dir its
	// namespace shows (as root), which must then be this Start's.
	ready, tmp := built.takeReady()
	run.ready = ready
	if parent != "" {
		if tmp == "" {
			if tmp, err = m.sandbox.tempDir(parent); err != nil {
				run.discardReady()
				built.done()
				return nil, xerrors.Errorf("agentproc: sandbox temp dir: %w", err)
			}
		}
		run.tmpDir = tmp
		info.TempDir = tmp
	}
	run.info = &info
	if pol.hosts != nil {
		hosts, err := m.newHostsRun(pol.hosts, owner)
		if err != nil {
			run.finish(m, true) // nothing ran in it
			return nil, err
		}
		run.hosts = hosts
	}
	return run, nil
}

// start starts cmd confined, on a thread that step, if any, prepared
// first.
func (r *sandboxRun) start(cmd *exec.Cmd, step threadStep) error {
	var hosts func(hostsListener)
	if r.hosts != nil {
		// The proxy's listener is made on the starting thread in the
		// tree's network namespace, before Landlock and seccomp (which
		// refuses listen); the Start takes it over.
		hosts = func(l hostsListener) { r.hosts.adopt(cmd, l) }
	}
	ready := r.ready
	r.ready = nil
	hold := func(ns treeNamespace, release func()) { r.mountns, r.release = ns, release }
	return r.built.start(cmd, sandboxStart{step: step, ready: ready, tmp: r.tmpDir, hosts: hosts, hold: hold})
}

// discardReady throws away r's ready thread if start did not take it.
func (r *sandboxRun) discardReady() {
	if r.ready != nil {
		r.ready.discard()
		r.ready = nil
	}
}

// closeHosts closes the tree's proxy listener, if any, and lets its token
// go from its owner's set (hostsRun.close), before the supervisor
// publishes the exit: done in finish, after it, a Start made as soon as
// Wait returned found the ended trees' tokens still held, so they filled
// a small owner set and pushed out an earlier Env secret
// (TestAttackDeadProxyTokensPushOutEnvSecrets failed so in one CI run);
// and every denial the proxy records for the tree is in Info by then.
func (r *sandboxRun) closeHosts() {
	if r != nil {
		r.hosts.close()
	}
}

// finish removes the temp dir from its path (dropTempDir) and lets go of
// the built policy; nil r does nothing. It runs once, when the tree is gone or never started.
// reuse says that no process of the tree can be left (its cgroups were
// removed, or it never started), so that the dir may serve a later Start.
func (r *sandboxRun) finish(m *Manager, reuse bool) {
	if r == nil {
		return
	}
	r.hosts.close()
	r.discardReady()
	if r.release != nil {
		// Off the supervisor's path: as root this unmakes the tree's
		// mount namespace, which waits for an RCU grace period (close
		// waits for it).
		release := r.release
		r.release = nil
		s := &m.sandbox
		s.tmpMu.Lock()
		async := s.tmpErr == nil
		if async {
			s.refills.Add(1)
		}
		s.tmpMu.Unlock()
		if !async {
			release()
		} else {
			go func() {
				defer s.refills.Done()
				release()
			}()
		}
	}
	r.built.done()
	if r.tmpDir == "" {
		return
	}
	if err := m.sandbox.dropTempDir(r.tmpDir, reuse); err != nil {
		m.cfg.logger.Warn(context.Background(), "remove sandbox temp dir", fieldError(err))
	}
}

// sandboxFor is the Sandbox a request runs under: its own, else the
// Manager's default, validated.
func (m *Manager) sandboxFor(req Request) (*Sandbox, error) {
	sb := req.Sandbox
	if sb == nil {
		sb = m.cfg.sandbox
	}
	if sb == nil {
		return nil, nil
	}
	if err := sb.validate(); err != nil {
		return nil, err
	}
	if req.Detach && sb.network() == NetworkHosts {
		return nil, xerrors.Errorf("Sandbox.Network %q with Request.Detach: a detached tree outlives the Manager's proxy: %w",
			NetworkHosts, ErrInvalidRequest)
	}
	return sb, nil
}

// threadStep is a step another part of the start takes on the sandbox's
// own thread before the sandbox's steps (cgroup v1 thread placement, see
// startCommand), so that one locked thread serves both; it returns what
// undoes it, run after cmd.Start whatever happened. nil is no step.
type threadStep func() (restore func() error, err error)

// DefaultSandbox returns a copy of the Manager's default sandbox
// (WithSandbox), nil without one: what a server narrows a client's policy
// within (Sandbox.Narrow).
func (m *Manager) DefaultSandbox() *Sandbox { return m.cfg.sandbox.Clone() }
