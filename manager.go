package agentproc

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"cdr.dev/slog/v3"
	"github.com/google/uuid"
	"golang.org/x/xerrors"
)

// MarkerEnv is the environment variable every started process (and so every
// descendant that keeps its environment) carries, holding the process ID.
const MarkerEnv = "AGENTPROC_ID"

// Request describes one command to start. The zero value of each field is
// usable except Command.
type Request struct {
	// Command is run as the last argument of the Manager's shell. It must
	// contain something other than white space, and no NUL byte.
	Command string `json:"command"`
	// WorkDir is the working directory. "" means the directory from
	// WithWorkDir if it exists, else the user's home directory. A non-empty
	// WorkDir must be an existing directory.
	WorkDir string `json:"workdir,omitempty"`
	// Env is applied last, over os.Environ() and the WithEnv hook. Keys must
	// be non-empty and contain neither '=' nor NUL; values must not contain
	// NUL.
	Env map[string]string `json:"env,omitempty"`
	// Background marks a command meant to keep running (a server). It is
	// recorded in Info; the process is supervised exactly like any other.
	Background bool `json:"background,omitempty"`
	// Stdin gives the process a pipe as stdin that the caller writes with
	// Process.WriteStdin and ends with Process.CloseStdin. false, the
	// default, gives it the null device.
	Stdin bool `json:"stdin,omitempty"`
	// TTY, when non-nil, runs the process under a pseudo-terminal of that
	// size (Unix only; Start returns ErrUnsupported elsewhere). The terminal
	// is stdin, stdout and stderr, so TTY implies a writable stdin. nil, the
	// default, means pipes.
	TTY *TTYSize `json:"tty,omitempty"`
}

// Manager starts and supervises processes. Use New to make one and Close to
// stop everything it started; the zero value is not usable. A Manager is
// safe for concurrent use.
type Manager struct {
	cfg config
	wg  sync.WaitGroup // one per supervise goroutine

	mu      sync.Mutex
	procs   map[string]*Process
	seq     uint64
	running int
	closed  bool
}

// New returns a Manager configured by opts.
func New(opts ...Option) *Manager {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	return &Manager{cfg: cfg, procs: make(map[string]*Process)}
}

// Start validates req and starts it. It never blocks on the command; use
// Process.Wait for that. Processes started through the Manager have no owner
// and are seen by Scope("") only.
func (m *Manager) Start(req Request) (*Process, error) {
	return m.start(req, "")
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

// Close stops every running process at once (terminate, grace period, kill),
// waits until all have exited, and makes later Starts fail with ErrClosed.
// Exited processes stay readable through the Process values callers hold.
// Calling Close again returns nil once the first call is done.
func (m *Manager) Close() error {
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
	// total, not one per process.
	var wg sync.WaitGroup
	for _, p := range running {
		wg.Go(func() { _, _ = p.stop(context.Background(), ReasonShutdown) })
	}
	wg.Wait()
	// Processes whose Start was in flight when closed was set are still
	// supervised; waiting on wg covers them too.
	m.wg.Wait()
	return nil
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

func (m *Manager) start(req Request, owner string) (*Process, error) {
	command, err := validateCommand(req.Command)
	if err != nil {
		return nil, err
	}
	if err := validateEnv(req.Env); err != nil {
		return nil, err
	}
	dir, err := m.resolveWorkDir(req.WorkDir)
	if err != nil {
		return nil, err
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if m.cfg.maxRunning > 0 && m.running >= m.cfg.maxRunning {
		m.mu.Unlock()
		return nil, xerrors.Errorf("%d running: %w", m.running, ErrTooManyProcesses)
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

	p, err := m.spawn(req, owner, command, dir, seq)
	if err != nil {
		m.mu.Lock()
		m.running--
		m.mu.Unlock()
		m.wg.Done()
		return nil, err
	}

	m.mu.Lock()
	m.procs[p.id] = p
	closed := m.closed
	m.mu.Unlock()
	if closed {
		// Close ran while this process was spawning and did not see it.
		go func() { _, _ = p.stop(context.Background(), ReasonShutdown) }()
	}
	return p, nil
}

// spawn starts the command. The caller has reserved a running slot and a
// supervise goroutine in m.wg.
func (m *Manager) spawn(req Request, owner, command, dir string, seq uint64) (*Process, error) {
	id := uuid.NewString()
	env := m.buildEnv(req.Env, id)

	st, err := openStdio(req, m.cfg.stdinStall)
	if err != nil {
		return nil, err
	}
	ctx, kill := context.WithCancel(context.Background())
	cmd := newShellCmd(ctx, m.cfg.shell, command)
	cmd.Dir = dir
	cmd.Env = env
	st.attach(cmd)
	sys := &sysProc{}
	cmd.Cancel = func() error {
		if err := sys.signal(SignalKill); err != nil && !xerrors.Is(err, errNoProcess) {
			return err
		}
		return nil
	}
	// With *os.File outputs os/exec starts no copying goroutines, so
	// WaitDelay only bounds how long Wait waits after Cancel before it kills
	// the leader itself.
	cmd.WaitDelay = pipeDrain

	fail := func(step string, err error) (*Process, error) {
		kill()
		st.closeAll()
		return nil, xerrors.Errorf("agentproc: %s: %w", step, err)
	}
	if err := sys.prepare(cmd); err != nil {
		return fail("prepare process", err)
	}
	if err := st.prepare(cmd); err != nil {
		return fail("prepare terminal", err)
	}
	if err := cmd.Start(); err != nil {
		sys.release()
		return fail("start "+m.cfg.shell[0], err)
	}
	// Only the child holds the write end now, so EOF comes when the last
	// process of the tree that inherited it is gone.
	st.closeChild()
	if err := sys.started(cmd); err != nil {
		_ = cmd.Wait()
		sys.release()
		kill()
		st.closeAll()
		return nil, xerrors.Errorf("agentproc: contain process: %w", err)
	}

	p := &Process{
		m:     m,
		id:    id,
		owner: owner,
		seq:   seq,
		buf:   newOutputBuffer(m.cfg.headBytes, m.cfg.tailBytes),
		sys:   sys,
		cmd:   cmd,
		kill:  kill,
		in:    st.in,
		done:  make(chan struct{}),
		info: Info{
			ID:         id,
			Command:    command,
			WorkDir:    dir,
			Owner:      owner,
			Background: req.Background,
			Stdin:      st.in != nil,
			TTY:        st.tty,
			Running:    true,
			PID:        cmd.Process.Pid,
			StartedAt:  m.cfg.clock.Now("agentproc", "start"),
		},
	}
	m.cfg.logger.Debug(context.Background(), "started process",
		slog.F("id", id), slog.F("pid", cmd.Process.Pid), slog.F("owner", owner))

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		copyOutput(p.buf, st.out)
	}()
	go p.supervise(st.out, readerDone)
	return p, nil
}

// copyOutput copies the pipe into the buffer until EOF or a read error
// (the drain deadline; EIO from a PTY master once no process holds the
// terminal). The buffer never fails or blocks, so the child is
// only ever slowed by the copy itself.
func copyOutput(buf *outputBuffer, r *os.File) {
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			_, _ = buf.Write(chunk[:n])
		}
		if err != nil {
			return
		}
	}
}

// exited is called once by each process's supervisor after its exit is
// published.
func (m *Manager) exited(*Process) {
	m.mu.Lock()
	m.running--
	m.reapLocked()
	m.mu.Unlock()
}

// reapLocked drops exited processes older than the retention age, then the
// oldest exited ones beyond maxExited. Running processes are never dropped.
func (m *Manager) reapLocked() {
	now := m.cfg.clock.Now("agentproc", "reap")
	type exitedProc struct {
		p    *Process
		info Info
	}
	var kept []exitedProc
	for id, p := range m.procs {
		if !p.exited() {
			continue
		}
		info := p.Info()
		if !info.ExitedAt.Add(m.cfg.retainAge).After(now) {
			delete(m.procs, id)
			continue
		}
		kept = append(kept, exitedProc{p, info})
	}
	if len(kept) <= m.cfg.maxExited {
		return
	}
	slices.SortFunc(kept, func(a, b exitedProc) int {
		if c := a.info.ExitedAt.Compare(b.info.ExitedAt); c != 0 {
			return c
		}
		return compareSeq(a.p.seq, b.p.seq)
	})
	for _, e := range kept[:len(kept)-m.cfg.maxExited] {
		delete(m.procs, e.p.id)
	}
}

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func validateCommand(command string) (string, error) {
	if strings.TrimSpace(command) == "" {
		return "", xerrors.Errorf("empty command: %w", ErrInvalidRequest)
	}
	if strings.ContainsRune(command, 0) {
		return "", xerrors.Errorf("command contains a NUL byte: %w", ErrInvalidRequest)
	}
	return command, nil
}

func validateEnv(env map[string]string) error {
	// Sorted so the error for a request with several bad keys is stable.
	for _, k := range slices.Sorted(maps.Keys(env)) {
		switch {
		case k == "":
			return xerrors.Errorf("env: empty key: %w", ErrInvalidRequest)
		case strings.ContainsAny(k, "=\x00"):
			return xerrors.Errorf("env key %q contains '=' or NUL: %w", k, ErrInvalidRequest)
		case strings.ContainsRune(env[k], 0):
			// The value is never echoed: it may be a secret.
			return xerrors.Errorf("env value of %q contains NUL: %w", k, ErrInvalidRequest)
		}
	}
	return nil
}

// resolveWorkDir returns the directory a request runs in.
func (m *Manager) resolveWorkDir(dir string) (string, error) {
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", xerrors.Errorf("work dir %q: %v: %w", dir, err, ErrInvalidRequest)
		}
		st, err := os.Stat(abs)
		switch {
		case err != nil && os.IsNotExist(err):
			return "", xerrors.Errorf("work dir %q does not exist: %w", dir, ErrInvalidRequest)
		case err != nil:
			return "", xerrors.Errorf("work dir %q: %v: %w", dir, err, ErrInvalidRequest)
		case !st.IsDir():
			return "", xerrors.Errorf("work dir %q is not a directory: %w", dir, ErrInvalidRequest)
		}
		return abs, nil
	}
	if d := m.cfg.workDir(); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
		m.cfg.logger.Warn(context.Background(), "default work dir unusable, using home", slog.F("dir", d))
	}
	home, err := homeDir()
	if err != nil {
		// No home either: the process inherits the host's directory.
		return "", nil
	}
	return home, nil
}

// buildEnv layers os.Environ(), the hook and the request's env, then the
// marker. Values are never logged.
func (m *Manager) buildEnv(reqEnv map[string]string, id string) []string {
	env := os.Environ()
	if m.cfg.envHook != nil {
		hooked, err := m.cfg.envHook(slices.Clone(env))
		if err != nil {
			m.cfg.logger.Warn(context.Background(), "env hook failed, using the base environment", fieldError(err))
		} else {
			env = hooked
		}
	}
	over := make(map[string]string, len(reqEnv)+1)
	maps.Copy(over, reqEnv)
	over[MarkerEnv] = id
	return mergeEnv(env, over)
}

// mergeEnv returns base with every key of over set to its value, replacing
// earlier entries (compared the way the OS compares names).
func mergeEnv(base []string, over map[string]string) []string {
	out := make([]string, 0, len(base)+len(over))
	overKeys := make(map[string]bool, len(over))
	for k := range over {
		overKeys[envKeyFold(k)] = true
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !overKeys[envKeyFold(k)] {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(over)) {
		out = append(out, k+"="+over[k])
	}
	return out
}

func fieldError(err error) slog.Field { return slog.Error(err) }
