package agentproc

import (
	"maps"
	"os"
	"slices"
	"time"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"
)

// An Option configures a Manager. Options are applied in order by New; a
// later option overrides an earlier one of the same kind.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config holds every Manager-wide setting. defaultConfig is the one place
// where defaults live.
type config struct {
	// foreignProc is set by New when /proc belongs to another PID
	// namespace (see foreignProc); it is not an option.
	foreignProc bool
	logger      slog.Logger
	// logDebug is set by WithLogger: the zero Logger is silent, but it
	// still builds every entry (the caller's location included), a
	// measurable share of BenchmarkStartWait for the one Debug line per
	// start (docs/measurements.md).
	logDebug     bool
	clock        quartz.Clock
	shell        []string
	envHook      func(base []string) ([]string, error)
	workDir      func() string
	headBytes    int
	tailBytes    int
	maxLineBytes int
	retainAge    time.Duration
	maxExited    int
	grace        time.Duration
	maxRunning   int
	stdinStall   time.Duration // real time; tests shorten it
	pipeDrain    time.Duration // real time; tests lengthen it
	cgroupParent string
	bgDetect     bool
	// nonInteractive applies nonInteractiveSettings to every child.
	nonInteractive bool
	logDir         string
	logMaxBytes    int64
	stateDir       string
	logDirBound    time.Duration // real time; tests shorten it
	inputQuiet     time.Duration
	limits         Limits   // see limits.go
	sandbox        *Sandbox // see sandbox.go; nil: no confinement
	sandboxSkip    uint32   // mechanisms a benchmark leaves out (sandboxSkip* bits)
	oomDelta       int      // see oom_linux.go
	// Redaction (redact.go): noRedaction turns it off; secrets are
	// WithSecrets' entries, secretsErr its validation error.
	noRedaction bool
	secrets     []secretEntry
	secretsErr  error
}

// Defaults, named so the README and tests can refer to them.
const (
	DefaultHeadBytes    = 16 << 10
	DefaultTailBytes    = 16 << 10
	DefaultMaxLineBytes = 2048
	DefaultRetention    = 5 * time.Minute
	DefaultMaxExited    = 256
	DefaultGracePeriod  = 5 * time.Second
)

func defaultConfig() config {
	return config{
		clock:          quartz.NewReal(),
		shell:          defaultShell(),
		workDir:        func() string { return "" },
		headBytes:      DefaultHeadBytes,
		tailBytes:      DefaultTailBytes,
		maxLineBytes:   DefaultMaxLineBytes,
		retainAge:      DefaultRetention,
		maxExited:      DefaultMaxExited,
		grace:          DefaultGracePeriod,
		stdinStall:     defaultStdinStall,
		pipeDrain:      defaultPipeDrain,
		bgDetect:       true,
		nonInteractive: true,
		logDirBound:    logDirBound,
		oomDelta:       DefaultOOMScoreDelta,
	}
}

// WithLogger sets the logger. The zero slog.Logger, the default, is silent.
// Environment values are never logged.
func WithLogger(l slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger, c.logDebug = l, true })
}

// WithClock sets the clock used for start and exit times, retention and the
// grace period. Tests pass a quartz mock. A nil clock keeps the real one.
func WithClock(clk quartz.Clock) Option {
	return optionFunc(func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	})
}

// WithShell sets the shell argv prefix; the command is appended as the last
// argument. The default is "sh", "-c" on Unix and "cmd.exe", "/d", "/s", "/c"
// on Windows (where the command line is passed to cmd.exe verbatim). An empty
// argv keeps the default.
func WithShell(argv ...string) Option {
	return optionFunc(func(c *config) {
		if len(argv) > 0 {
			c.shell = append([]string(nil), argv...)
		}
	})
}

// WithEnv sets a hook that rewrites the base environment for every process:
// os.Environ() with the non-interactive settings applied (see
// WithNonInteractiveEnv), so the hook sees them and may change or remove
// any. If the hook fails, a warning is logged and the base is used.
// Request.Env is applied after the hook and wins.
func WithEnv(hook func(base []string) ([]string, error)) Option {
	return optionFunc(func(c *config) { c.envHook = hook })
}

// WithWorkDir sets the provider of the default working directory, used when
// Request.WorkDir is empty. When the provider returns "" or a path that is
// not an existing directory, the user's home directory is used.
func WithWorkDir(dir func() string) Option {
	return optionFunc(func(c *config) {
		if dir != nil {
			c.workDir = dir
		}
	})
}

// WithOutputLimits sets how much output each process keeps: the first
// headBytes, the last tailBytes, and the longest line Output.Text shows
// before cutting it (maxLineBytes <= 0 disables cutting). Negative sizes are
// treated as zero, sizes above 1 GiB as 1 GiB (512 MiB where int is 32
// bits, so that head plus tail fits in an int). The limits are bounds, not
// allocations: a process's buffer grows with its output, by doubling, up to
// headBytes+tailBytes. Defaults: 16384, 16384, 2048.
func WithOutputLimits(headBytes, tailBytes, maxLineBytes int) Option {
	return optionFunc(func(c *config) {
		c.headBytes = clampOutputLimit(headBytes)
		c.tailBytes = clampOutputLimit(tailBytes)
		c.maxLineBytes = maxLineBytes
	})
}

// WithInputQuiet sets the quiet period of input detection: a process with
// Request.Stdin or Request.TTY is awaiting input when one of its tree is
// blocked reading that stdin and the tree has written no output for d.
// Default DefaultInputQuiet; d <= 0 keeps the default.
func WithInputQuiet(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.inputQuiet = d
		}
	})
}

// WithRetention sets how long exited processes are kept (age, measured from
// their exit) and how many exited processes are kept at most (oldest are
// dropped first). Running processes are never dropped. A zero or negative
// age drops exited processes at the next access; maxExited < 0 means 0.
// Defaults: 5 minutes, 256.
func WithRetention(age time.Duration, maxExited int) Option {
	return optionFunc(func(c *config) {
		c.retainAge = age
		c.maxExited = max(maxExited, 0)
	})
}

// WithGracePeriod sets how long Stop and Close wait after the terminate
// signal before killing the process tree. Default 5s; negative means 0.
func WithGracePeriod(d time.Duration) Option {
	return optionFunc(func(c *config) { c.grace = max(d, 0) })
}

// WithMaxRunning limits how many processes may run at once; Start returns
// ErrTooManyProcesses beyond it. 0, the default, means unlimited.
func WithMaxRunning(n int) Option {
	return optionFunc(func(c *config) { c.maxRunning = max(n, 0) })
}

// WithCgroup runs every process in cgroups of its own, created under
// parent and removed after the process exits. parent is an absolute path
// inside a cgroup v2 hierarchy (such as /sys/fs/cgroup/agents), or inside
// one cgroup v1 hierarchy (such as /sys/fs/cgroup/memory/agents: the same
// relative path, agents, is then used, and created, in every v1 hierarchy
// a limit needs, as runc does), or CgroupAuto. The shell is created inside
// them, so every descendant is too, including those that leave the process
// group and clear their environment; stopping kills the whole tree. Where
// the memory controller is on, Info.MaxRSS is the tree's peak; Info.CPUTime
// is then the whole tree's CPU time.
//
// Without WithCgroup, a process with Limits still gets cgroups of its own,
// under a default parent found in this order (the README's "Which
// parent"): the host's own cgroup where it can pass the controllers on;
// on cgroup v2, the host's own cgroup after the host has moved itself into
// <own>/agentproc-host, where <own> offers the controllers and holds the
// host alone; as root, the top of the cgroup v2 hierarchy the host sees
// (the root cgroup, or a container's cgroup namespace root). Naming a
// parent opts out of both the move and the climb.
//
// Linux only. If parent is not a writable cgroup directory, or this is
// not Linux, Start fails (wrapping ErrInvalidRequest, or ErrUnsupported
// where cgroups are unavailable); it never falls back to weaker
// containment. "" (the default) turns it off.
func WithCgroup(parent string) Option {
	return optionFunc(func(c *config) { c.cgroupParent = parent })
}

// CgroupAuto is the WithCgroup parent that makes the library find it as
// it does without WithCgroup (including, where the host runs in a cgroup
// v2 that holds it and nothing else, such as systemd-run --user --scope -p
// Delegate=yes, the move of the host into <own>/agentproc-host). Unlike
// the default, every process gets a cgroup, with or without Limits.
const CgroupAuto = "auto"

// WithLimits sets the operator's limits: each field of l that is set is
// both the default for a request that leaves that field at zero and the
// ceiling for one that sets it. A request may lower a limit, never lift it:
// a field above its ceiling fails Start with ErrInvalidRequest naming the
// field and the ceiling, through the Go API and httpapi alike. The zero
// Limits, the default, means no limits and no ceilings.
func WithLimits(l Limits) Option {
	return optionFunc(func(c *config) { c.limits = l })
}

// WithOOMScoreDelta makes every process's oom_score_adj the host process's
// own plus delta, capped at 1000, so that when memory runs out the kernel's
// OOM killer picks a command before the agent that runs it. The default is
// DefaultOOMScoreDelta (500); 0 or less leaves the processes at the host's
// value. Linux only; elsewhere it does nothing.
//
// The value is set on the shell right after it starts, by the output
// reader's thread as its first act (shortly after Start returns; on a host
// whose CPUs are all busy, once the Go scheduler runs it), and on what the
// shell has started by then, each before its own children are looked up,
// so every later descendant inherits it. The shell is not reaped before
// that is done, so the PID written to is always the shell's. A process
// whose fork is in progress at the moment its parent is changed (the
// kernel copies the value before it lists the child), or that is forked
// and orphaned in that first moment, keeps the host's value, as do its
// descendants.
func WithOOMScoreDelta(delta int) Option {
	return optionFunc(func(c *config) { c.oomDelta = max(delta, 0) })
}

// WithBackgroundDetection turns the parsing of commands for a trailing
// top-level & on or off (default on). When on, and the shell is a POSIX
// shell (sh, bash, dash, zsh, ksh, ash), Start runs AnalyzeCommand: a
// trailing & is removed and the request becomes a Background one, and the
// analysis's warnings go into Info.Warnings. A command that does not parse
// runs unchanged (the shell reports the error) and is not promoted.
func WithBackgroundDetection(on bool) Option {
	return optionFunc(func(c *config) { c.bgDetect = on })
}

// WithNonInteractiveEnv turns on or off (default on) the environment that
// keeps commands from waiting for a person. When on, every child gets, over
// os.Environ() and under the WithEnv hook and Request.Env (which can set
// any of them back):
//
//   - EDITOR, VISUAL, GIT_EDITOR and GIT_SEQUENCE_EDITOR set to a command
//     that fails at once, saying on stderr that no editor is available,
//     and GIT_MERGE_AUTOEDIT=no;
//   - PAGER, GIT_PAGER, MANPAGER, GH_PAGER and SYSTEMD_PAGER set to cat;
//   - GIT_TERMINAL_PROMPT=0, GCM_INTERACTIVE=never, GH_PROMPT_DISABLED=1,
//     DEBIAN_FRONTEND=noninteractive and PIP_NO_INPUT=1, with GIT_ASKPASS,
//     SSH_ASKPASS and GPG_TTY removed;
//   - without Request.TTY only: TERM=dumb and NO_COLOR=1.
//
// Nothing answers "yes" on the user's behalf. The README gives the reason
// for each entry.
func WithNonInteractiveEnv(on bool) Option {
	return optionFunc(func(c *config) { c.nonInteractive = on })
}

// homeDir is a variable so the fallback is visible in one place.
var homeDir = os.UserHomeDir

// WithOutputLog makes every process also write all of its output to a file
// of its own, dir/ID.log (mode 0600; dir is created 0700 if missing), whose
// path Info.LogPath reports. While the output fits in maxBytes the file holds
// all of it; once it grows past maxBytes the file is cut back to its first
// maxBytes/2 bytes, the rest is only counted, and a last line gives the
// count when the process exits. maxBytes <= 0 means no cap. An empty dir,
// the default, turns logging off.
//
// The file is created before the command starts: if it cannot be created
// (an unwritable dir), or the directory does not answer within 5 s (a dead
// network mount), Start fails with an error naming the file and nothing
// runs; after such a timeout, Starts fail at once until the directory
// answers again. A write error later (a full disk) logs one warning and the
// process runs on without its log. The file is removed in the background
// when retention drops the process, and by Close. No file-system call is
// made under a lock: a hung directory delays an exit by at most 5 s, Close
// by at most 5 s beyond its processes' exits, and Get and List not at all.
func WithOutputLog(dir string, maxBytes int64) Option {
	return optionFunc(func(c *config) {
		c.logDir = dir
		c.logMaxBytes = maxBytes
	})
}

// WithStateDir makes the Manager record every process it starts in dir, so
// that a Manager started after this one died (crash, OOM kill, SIGKILL) can
// stop what it left behind. A record is written before the child runs,
// updated with the shell's PID and start time once it runs and with its
// exit once it exits, and removed when retention drops the process or Close
// ends it. No write can be seen in part (see docs/containment.md) and none
// runs under a lock of the Manager. The records need only outlive the host
// process, not a reboot, so a tmpfs dir (/run, $XDG_RUNTIME_DIR) is a
// natural place for them.
//
// A Manager with a state dir locks it (dir/lock): only one live Manager may
// use a dir at a time. When New starts, it recovers in the background every
// record left by a Manager that is dead: trees still running are stopped
// like Close stops them and are listed as exited with ReasonOrphaned and
// whatever their output log holds; Recovered waits for that, and
// Request.Detach processes are adopted instead. A guard process (a copy of
// the host binary holding a pipe to it) also kills the Manager's trees, all
// but the detached ones, as soon as the host dies, even when no new Manager
// is ever started (see docs/containment.md).
//
// A dir that cannot be used (not creatable or writable, or locked by another
// live Manager) makes every Start and Recovered fail with an error naming
// the dir and the reason; the Manager never runs without the state it was
// asked to keep. Linux only: elsewhere Start fails with ErrUnsupported. ""
// (the default) turns it off.
func WithStateDir(dir string) Option {
	return optionFunc(func(c *config) { c.stateDir = dir })
}

// WithSandbox confines every process started without a Request.Sandbox of
// its own by sb (see Sandbox and WorkspaceSandbox). nil, the default, means
// no confinement. sb is copied; later changes to it do not apply.
// A detached process (Request.Detach) is confined by its runner in the
// same way.
func WithSandbox(sb *Sandbox) Option {
	sb = sb.Clone()
	return optionFunc(func(c *config) { c.sandbox = sb })
}

// WithSecrets redacts the values of secrets, by name, in the output of
// every process: a value reads "[redacted:NAME]" wherever it, or its
// base64, percent- or JSON-encoded form, appears (see the README's
// Redaction section). They add to the default set: the values of the
// host's environment variables whose names look like secrets (the
// sandbox's rule, SandboxEnv), as New finds them. Names are 1 to 64
// letters, digits, '_', '.' or '-'; values are MinSecretBytes to
// MaxSecretBytes long; at most MaxSecrets are named. A map breaking these
// rules makes every Start fail with ErrInvalidRequest naming the secret
// (never its value). A later WithSecrets replaces an earlier one; the map
// is copied.
func WithSecrets(secrets map[string]string) Option {
	err := validateSecrets("WithSecrets", secrets)
	var entries []secretEntry
	for _, k := range slices.Sorted(maps.Keys(secrets)) {
		entries = append(entries, secretEntry{k, secrets[k]})
	}
	return optionFunc(func(c *config) { c.secrets, c.secretsErr = entries, err })
}

// WithRedaction(false) turns redaction off entirely: neither WithSecrets,
// nor Request.Secrets, nor the host's secret-looking variables are
// redacted. On, the default, redacts all three.
func WithRedaction(on bool) Option {
	return optionFunc(func(c *config) { c.noRedaction = !on })
}
