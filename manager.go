package agentproc

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"cdr.dev/slog/v3"
	"golang.org/x/xerrors"
)

// MarkerEnv is the environment variable every started process (and so every
// descendant that keeps its environment) carries, holding the process ID.
const MarkerEnv = "AGENTPROC_ID"

// Manager starts and supervises processes. Use New to make one and Close to
// stop everything it started; the zero value is not usable. A Manager is
// safe for concurrent use.
type Manager struct {
	cfg  config
	wg   sync.WaitGroup // one per supervise goroutine
	logs *logDir        // output logs; opens none without WithOutputLog

	// The shell's path under PATH as it was (see shellPath).
	shellMu       sync.Mutex
	shellPathEnv  string
	shellResolved string

	env envCache // see buildEnv

	mu      sync.Mutex
	procs   map[string]*Process
	keys    map[keyID]*keyEntry  // see keys.go
	keyOf   map[string]*keyEntry // process ID → the key that names it
	seq     uint64
	running int
	closed  bool
	// exitOrder lists the retained exited processes, oldest exit first.
	exitOrder []exitRecord

	state      *stateDir      // nil without WithStateDir; see statedir.go
	instance   string         // this Manager's ID in its state records
	events     *eventBus      // see events.go
	ports      portWatcher    // see ports.go
	input      inputWatcher   // see input.go
	sandbox    managerSandbox // see sandbox_run.go
	hosts      hostsProxy     // NetworkHosts' proxy; see hosts.go
	cgroupSets cgroupSetPool  // see containment_linux.go
	peaks      treePeaks      // the exit records' hold; see peak_linux.go
	// redact is the Manager's redaction set (redact.go): the host's
	// secret-looking variables and WithSecrets; nil when there is none
	// or redaction is off.
	redact *redactSet
	// started is the set of the secrets of every request m has started,
	// which every stream of m redacts too (redact.go).
	started startedSecrets
	// owned is, per owner, the set of the secret-looking Env values of
	// the requests that owner has started, which the owner's streams
	// redact (redact_owner.go).
	owned ownerSecrets
}

// exitRecord is one entry of Manager.exitOrder.
type exitRecord struct {
	p  *Process
	at time.Time // the process's ExitedAt
}

// portsAvailable is the platform's portsSupported, and ErrUnsupported
// under a /proc of another PID namespace, whose sockets and descriptors
// belong to other processes than our PIDs name.
func (m *Manager) portsAvailable() error {
	if m.cfg.foreignProc {
		return xerrors.Errorf("ports: /proc belongs to another PID namespace: %w", ErrUnsupported)
	}
	return portsSupported()
}

// New returns a Manager configured by opts.
func New(opts ...Option) *Manager {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if foreignProc() {
		cfg.foreignProc = true
		cfg.logger.Warn(context.Background(),
			"agentproc: /proc belongs to another PID namespace (unshare --pid without remounting /proc?): "+
				"processes that leave their process group are not found or killed, and Leftovers counts "+
				"1 for a group that outlived its shell; mount a /proc of this namespace to restore both")
	}
	m := &Manager{cfg: cfg, logs: newLogDir(&cfg), procs: make(map[string]*Process)}
	if !cfg.noRedaction {
		m.redact = newRedactSet(append(slices.Clone(cfg.secrets), hostSecrets()...))
	}
	m.events = newEventBus(func() time.Time { return cfg.clock.Now("agentproc", "event") })
	if cfg.stateDir != "" {
		m.openState()
		m.cgroupSets.setGuard(m.state.guard())
	}
	return m
}

// Start validates req and starts it. It never waits for the command; use
// Process.Wait for that. Processes started through the Manager have no owner
// and are seen by Scope("") only. With a Request.Key it may return a process
// an earlier Start began; Scope("").StartOrAttach says which it did.
//
// ctx bounds only what Start itself may wait for: a concurrent Start with
// the same Request.Key that is still spawning. When ctx ends first Start
// returns ctx.Err() and starts nothing. Like a net.Dialer's context, it does
// not bound the life of the process it starts: that is Request.Timeout,
// Process.Stop and Close.
func (m *Manager) Start(ctx context.Context, req Request) (*Process, error) {
	p, _, err := m.startAttach(ctx, req, "")
	return p, err
}

// Get returns the process with the given ID, or ErrNotFound.
func (m *Manager) Get(id string) (*Process, error) {
	return m.get(id, func(*Process) bool { return true })
}

// List returns the Info of every retained process: running ones first, then
// the rest, each group newest first.
func (m *Manager) List() []Info {
	return m.list(func(*Process) bool { return true })
}

// Remove forgets an exited process now, as retention would later: it is
// no longer listed or found, its Key may name a new process, and its
// output log and state-directory record are deleted. Process values
// callers hold stay readable. It returns ErrRunning for a process that
// has not exited (stop it first) and ErrNotFound for an unknown ID or one
// retention has already dropped.
func (m *Manager) Remove(id string) error {
	return m.remove(id, func(*Process) bool { return true })
}

// Close stops every running process at once (terminate, grace period, kill),
// waits until all have exited, and makes later Starts fail with ErrClosed.
// Exited processes stay readable through the Process values callers hold.
// Calling Close again returns nil once the first call is done. It is
// Shutdown without a deadline, for callers that want io.Closer.
func (m *Manager) Close() error {
	return m.Shutdown(context.Background())
}

// Shutdown is Close bounded by ctx, as net/http's Server.Shutdown is: it
// makes later Starts fail with ErrClosed, gives every running process the
// stop ladder at once, and returns nil when all have exited and been
// cleaned up. When ctx ends first it kills every process tree at once (as
// Process.Stop does) and returns ctx.Err() without waiting for the exits
// to be recorded; call Close, or Shutdown again, to wait for that.
// Detached processes (Request.Detach) are left running, only no longer
// followed.
func (m *Manager) Shutdown(ctx context.Context) error {
	// Recovery may still be adopting processes; they must be seen below.
	select {
	case <-m.recovered():
	case <-ctx.Done():
		return ctx.Err()
	}
	m.mu.Lock()
	m.closed = true
	var running []*Process
	for _, p := range m.procs {
		if !p.exited() {
			running = append(running, p)
		}
	}
	m.mu.Unlock()

	// Every process gets its ladder at the same time: one grace period in
	// total, not one per process, and one pass over /proc begun after this
	// moment serves all their terminate steps. The pass is taken before
	// any signal: once a thousand processes are dying, reading /proc is
	// ten times slower. Each stop kills its tree at once when ctx ends, so
	// none is left half-stopped.
	since := time.Now()
	if len(running) > 0 {
		prepareStops(&m.cfg, since)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var wg sync.WaitGroup
		for _, p := range running {
			if p.sup.det != nil {
				wg.Go(p.sup.releaseDetached)
				continue
			}
			wg.Go(func() { _, _ = p.sup.stop(ctx, ReasonShutdown, since) })
		}
		wg.Wait()
		// Processes whose Start was in flight when closed was set are still
		// supervised; waiting on wg covers them too.
		m.wg.Wait()
		m.started.wait() // no Start runs: no merge starts after this
		m.owned.wait()
		// Every supervisor has published its exit by now. The clean-up is
		// done here, not after the select, so that a Shutdown whose ctx
		// ended still finishes it once the killed processes are gone.
		m.mu.Lock()
		for _, p := range m.procs {
			m.logs.remove(p.sup.log)
		}
		m.mu.Unlock()
		m.logs.waitRemoved()
		// The ready cgroup sets go before the guard that lists them.
		m.cgroupSets.close()
		m.closeState()
		m.sandbox.close()
		m.hosts.close()
		m.ports.close()
		m.input.close()
		m.events.close()
		m.peaks.close()
	}()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Manager) get(id string, visible func(*Process) bool) (*Process, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reapLocked()
	p, ok := m.procs[id]
	if !ok || !visible(p) {
		return nil, xerrors.Errorf("process %q: %w", id, ErrNotFound)
	}
	return p, nil
}

func (m *Manager) list(visible func(*Process) bool) []Info {
	m.mu.Lock()
	m.reapLocked()
	procs := make([]*Process, 0, len(m.procs))
	for _, p := range m.procs {
		if visible(p) {
			procs = append(procs, p)
		}
	}
	m.mu.Unlock()

	type entry struct {
		info Info
		seq  uint64
	}
	entries := make([]entry, len(procs))
	for i, p := range procs {
		entries[i] = entry{p.Info(), p.seq}
	}
	// seq is unique and grows with start order, so it is both the "newest
	// first" key and a total tie-breaker: the order is stable across calls.
	slices.SortFunc(entries, func(a, b entry) int {
		if a.info.Running != b.info.Running {
			if a.info.Running {
				return -1
			}
			return 1
		}
		if a.seq > b.seq {
			return -1
		}
		return 1
	})
	infos := make([]Info, len(entries))
	for i, e := range entries {
		infos[i] = e.info
	}
	return infos
}

func (m *Manager) remove(id string, visible func(*Process) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reapLocked()
	p, ok := m.procs[id]
	if !ok || !visible(p) {
		return xerrors.Errorf("process %q: %w", id, ErrNotFound)
	}
	// A process counts as exited once its supervisor has registered the
	// exit (registerExit, just before Info says so): until then it may
	// still be writing its log and record.
	i := slices.IndexFunc(m.exitOrder, func(e exitRecord) bool { return e.p == p })
	if i < 0 {
		return xerrors.Errorf("process %q: %w", id, ErrRunning)
	}
	// One copy of the tail, bounded by the retention count: cheap next to
	// the file removals droppedLocked queues.
	m.exitOrder = slices.Delete(m.exitOrder, i, i+1)
	delete(m.procs, id)
	m.droppedLocked(p)
	return nil
}

// startAttach starts req for owner. When req.Key names a retained process it
// returns that one instead and reports attached (see Scope.StartOrAttach).
func (m *Manager) startAttach(ctx context.Context, req Request, owner string) (*Process, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	command, dir, warnings, err := m.validate(&req)
	if err != nil {
		return nil, false, err
	}

	var claim *keyEntry
	if req.Key != "" {
		p, c, err := m.claimKey(ctx, req, owner)
		if p != nil || err != nil {
			return p, p != nil, err
		}
		claim = c
	}

	m.mu.Lock()
	if m.closed {
		m.settleKeyLocked(claim, nil)
		m.mu.Unlock()
		return nil, false, ErrClosed
	}
	if m.cfg.maxRunning > 0 && m.running >= m.cfg.maxRunning {
		m.settleKeyLocked(claim, nil)
		m.mu.Unlock()
		return nil, false, xerrors.Errorf("%d running: %w", m.running, ErrTooManyProcesses)
	}
	// The slot is taken before spawning so concurrent Starts cannot overshoot
	// the limit; a failed spawn gives it back.
	m.running++
	m.seq++
	seq := m.seq
	// Counting the supervisor before unlocking keeps Close from missing a
	// process whose spawn is still in flight.
	m.wg.Add(1)
	m.mu.Unlock()

	// Before the process exists, as registerSecrets; refused past the
	// owner's bound, after the slot is taken, so that the one undo below
	// gives it back.
	release, err := m.holdOwnerSecrets(req, owner)
	var p *Process
	var run func()
	if err == nil {
		if p, run, err = m.spawn(req, owner, command, dir, seq, warnings); err != nil {
			release()
		} else {
			p.releaseSecrets = release
		}
	}
	if err != nil {
		m.mu.Lock()
		m.running--
		m.settleKeyLocked(claim, nil)
		m.mu.Unlock()
		m.wg.Done()
		return nil, false, err
	}

	m.mu.Lock()
	m.procs[p.id] = p
	m.settleKeyLocked(claim, p)
	closed := m.closed
	m.mu.Unlock()
	run()
	if closed {
		// Close ran while this process was spawning and did not see it.
		// Stopped here rather than in a goroutine, so that nothing of it
		// outlives Close; this race is rare and costs at most the grace.
		// Its exit removes its output log (registerExit sees closed).
		_, _ = p.sup.stop(context.Background(), ReasonShutdown, time.Now())
	}
	p.emitInfo(EventStarted)
	return p, false, nil
}

// registerExit is called once by each process's supervisor, with its exit time,
// just before the exit is published in Info.
func (m *Manager) registerExit(p *Process, at time.Time) {
	if p.releaseSecrets != nil {
		p.releaseSecrets() // the owner's set may let its Env secrets go now
	}
	m.mu.Lock()
	m.running--
	m.exitOrder = append(m.exitOrder, exitRecord{p, at})
	if m.closed {
		m.logs.remove(p.sup.log) // Close may have swept the logs before this exit
	}
	m.reapLocked()
	m.mu.Unlock()
}

// reapLocked drops exited processes older than the retention age, then the
// oldest exited ones beyond maxExited. Running processes are never dropped.
// exitOrder is kept in exit order, so this looks only at the front of it:
// reaping costs nothing per retained process, where sorting the retained
// processes on every exit would cost O(n log n) per Start+Wait.
func (m *Manager) reapLocked() {
	now := m.cfg.clock.Now("agentproc", "reap")
	for len(m.exitOrder) > 0 {
		e := m.exitOrder[0]
		if len(m.exitOrder) <= m.cfg.maxExited && e.at.Add(m.cfg.retainAge).After(now) {
			return
		}
		m.exitOrder[0] = exitRecord{}
		m.exitOrder = m.exitOrder[1:]
		delete(m.procs, e.p.id)
		m.droppedLocked(e.p)
	}
}

// droppedLocked releases what a process held in the Manager once retention
// or Remove has dropped it: its Key, its output log and its state record.
func (m *Manager) droppedLocked(p *Process) {
	m.freeKeyLocked(p)
	m.logs.remove(p.sup.log)
	m.state.dropLocked(p.id)
	p.emit(Event{Type: EventDropped})
}

// buildEnv layers os.Environ(), the non-interactive settings, the hook,
// PWD, the request's env, then the marker. Values are never logged.
//
// PWD names dir, the directory the child starts in (where envHasPWD: it is
// what a shell would export after cd, and what os/exec sets when it builds
// the environment itself). The host's PWD names the host's directory, and a
// shell that finds it stale must look the directory up again.
//
// Under a sandbox, what the host passes on (after the hook) goes through
// the sandbox's filter (sandboxEnv) before the request's own variables.
func (m *Manager) buildEnv(reqEnv map[string]string, id, dir string, tty bool, sbx *sandboxRun) []string {
	env := m.env.base(os.Environ(), m.cfg.nonInteractive, tty)
	pwd := dir != "" && envHasPWD
	if m.cfg.envHook == nil && len(reqEnv) == 0 && sbx == nil {
		// The common case, without a map: the base less any marker or
		// PWD the host inherited, plus the process's own.
		out := make([]string, 0, len(env)+2)
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			if k = envKeyFold(k); k != MarkerEnv && (k != "PWD" || !pwd) {
				out = append(out, kv)
			}
		}
		if pwd {
			out = append(out, "PWD="+dir)
		}
		return append(out, MarkerEnv+"="+id)
	}
	if m.cfg.envHook != nil {
		hooked, err := m.cfg.envHook(slices.Clone(env))
		if err != nil {
			m.cfg.logger.Warn(context.Background(), "env hook failed, using the base environment", fieldError(err))
		} else {
			env = hooked
		}
	}
	if sbx != nil {
		env = sandboxEnv(env, sbx.env, sbx.tmpDir)
	}
	over := make(map[string]string, len(reqEnv)+2)
	if pwd {
		over["PWD"] = dir
	}
	maps.Copy(over, reqEnv)
	over[MarkerEnv] = id
	return mergeEnv(env, over)
}

// envCache keeps the base environment with the non-interactive defaults
// applied, for as long as the host's environment stays what it was built
// from. Building it (two maps and a sort per Start) is a measurable share
// of BenchmarkStartWait (docs/measurements.md); checking that os.Environ
// is unchanged compares strings that share their bytes with the cached
// ones.
type envCache struct {
	mu      sync.Mutex
	environ []string    // os.Environ() as it was when built
	built   [2][]string // environ with the defaults, without (0) and with (1) a TTY
}

// base returns environ with the non-interactive defaults applied when
// nonInteractive is set. The result is shared: callers must not modify it.
func (c *envCache) base(environ []string, nonInteractive, tty bool) []string {
	if !nonInteractive {
		return environ
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.environ, environ) {
		c.environ = environ
		c.built = [2][]string{}
	}
	i := boolIndex(tty)
	if c.built[i] == nil {
		c.built[i] = nonInteractiveEnv(environ, tty)
	}
	return c.built[i]
}

// mergeEnv returns base without the keys in unset and with every key of
// over set to its value, replacing earlier entries (keys are compared the
// way the OS compares names).
func mergeEnv(base []string, over map[string]string, unset ...string) []string {
	out := make([]string, 0, len(base)+len(over))
	drop := make(map[string]bool, len(over)+len(unset))
	for k := range over {
		drop[envKeyFold(k)] = true
	}
	for _, k := range unset {
		drop[envKeyFold(k)] = true
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[envKeyFold(k)] {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(over)) {
		out = append(out, k+"="+over[k])
	}
	return out
}

func fieldError(err error) slog.Field { return slog.Error(err) }

// shellCmd builds the command of one Start. The shell is looked up in PATH
// once per value of PATH, not on every Start: exec.Command's LookPath stats
// each PATH entry in turn, a measurable share of each Start in
// BenchmarkStartWait (docs/measurements.md).
// The shell keeps the name it was given as its argv[0] ($0), as with
// exec.Command.
func (m *Manager) shellCmd(command string) *exec.Cmd {
	shell := m.cfg.shell
	if path := m.shellPath(); path != "" {
		shell = append([]string{path}, shell[1:]...)
	}
	cmd := newShellCmd(context.Background(), shell, command)
	cmd.Args[0] = m.cfg.shell[0]
	return cmd
}

// shellPath returns the shell's path as LookPath finds it under the current
// PATH, or "" when the name is used as given (it holds a separator, or
// LookPath fails, in which case exec.Command reports why).
func (m *Manager) shellPath() string {
	name := m.cfg.shell[0]
	if filepath.Base(name) != name {
		return ""
	}
	pathEnv := os.Getenv("PATH")
	m.shellMu.Lock()
	if m.shellPathEnv == pathEnv && m.shellResolved != "" {
		resolved := m.shellResolved
		m.shellMu.Unlock()
		return resolved
	}
	m.shellMu.Unlock()
	// Looked up without the lock: it stats files.
	resolved, err := exec.LookPath(name)
	if err != nil || !filepath.IsAbs(resolved) {
		return ""
	}
	m.shellMu.Lock()
	m.shellPathEnv, m.shellResolved = pathEnv, resolved
	m.shellMu.Unlock()
	return resolved
}

// forgetShellPath drops the cached shell path after a Start failed, so
// that the next one looks the shell up again (it may have moved).
func (m *Manager) forgetShellPath() {
	m.shellMu.Lock()
	m.shellResolved = ""
	m.shellMu.Unlock()
}
