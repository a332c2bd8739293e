package agentproc

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cdr.dev/slog/v3"
	"golang.org/x/xerrors"
)

// This file is what Start knows about a Request before it allocates
// anything: the type, the Manager's defaults that fill it in, and validate,
// the one place a request is checked. A feature's own check may live next
// to the feature (timeout.go, watchdog.go, observe.go, limits.go,
// statedir.go, sandbox_run.go, the per-OS shell check), but it is called
// from validate only, in the order written there.

// Request describes one command to start. The zero value of each field is
// usable except Command.
type Request struct {
	// Command is run as the last argument of the Manager's shell. It must
	// contain something other than white space, and no NUL byte.
	Command string
	// WorkDir is the working directory. "" means the directory from
	// WithWorkDir if it exists, else the user's home directory. A non-empty
	// WorkDir must be an existing directory.
	WorkDir string
	// Env is applied last, over os.Environ() and the WithEnv hook. Keys must
	// be non-empty and contain neither '=' nor NUL; values must not contain
	// NUL.
	Env map[string]string
	// Background marks a command meant to keep running (a server). It is
	// recorded in Info; the process is supervised exactly like any other.
	Background bool
	// Timeout limits how long the command may run, measured from its start
	// with the Manager's clock. When it expires the process is stopped like
	// Stop does (terminate, grace period, kill) with Reason ReasonTimeout.
	// 0 means no limit; a negative Timeout is ErrInvalidRequest. It does not
	// bound how long anyone waits: that is the ctx of each call.
	Timeout time.Duration
	// Key makes Start idempotent within the owner: while a process started
	// with the same Key is retained, a Start with the same Command, WorkDir,
	// Env and Background returns that process (running or exited) and starts
	// nothing, and a Start with a different one is ErrKeyConflict. The key
	// is free again once retention drops the process. "" means no key.
	// Scope.StartOrAttach says which of the two a Start did.
	Key string
	// Stdin gives the process a pipe as stdin that the caller writes with
	// Process.WriteStdin and ends with Process.CloseStdin. false, the
	// default, gives it the null device.
	Stdin bool
	// Detach makes the process outlive its Manager (see WithStateDir, which
	// it needs; without a state dir it is ErrInvalidRequest): it runs in a
	// session of its own, its output goes to files in the state dir (the
	// head and a rolling tail, capped by WithOutputLog's maxBytes or
	// DefaultDetachLogBytes), and its exit status is written there too.
	// Close and the host's death leave it running, and the next Manager on
	// the dir adopts it: every method works on it as on any process. It
	// cannot be combined with Stdin, TTY, Timeout, IdleTimeout or MaxOutput
	// (ErrInvalidRequest) nor with Limits, WithLimits' defaults included
	// (ErrUnsupported), and WithCgroup does not apply to it. Linux only;
	// elsewhere Start returns ErrUnsupported.
	// false, the default, ties the process to the Manager.
	Detach bool
	// Ready, when non-nil, says how to tell that the process is ready (a
	// server listening, a line printed); once it is, Info.Ready becomes
	// true and an EventReady is published. nil, the default, checks
	// nothing.
	Ready *ReadyCheck
	// Verbatim runs Command exactly as given: no background detection, even
	// when the Manager has it on (WithBackgroundDetection), so a trailing
	// "&" stays in the command and Background stays as set. false, the
	// default, leaves the choice to the Manager. A server that promises
	// its clients verbatim commands (httpapi's Coder profile) sets it per
	// request.
	Verbatim bool
	// TTY, when non-nil, runs the process under a pseudo-terminal of that
	// size (Unix only; Start returns ErrUnsupported elsewhere). The terminal
	// is stdin, stdout and stderr, so TTY implies a writable stdin. nil, the
	// default, means pipes.
	TTY *TTYSize
	// Limits bounds the memory, processes and CPU of the whole tree; see
	// Limits. A zero field takes the Manager's default (WithLimits); a limit
	// that cannot be enforced here makes Start fail with ErrUnsupported.
	Limits Limits
	// IdleTimeout stops the process (like Stop, with ReasonIdle) once it has
	// written no output for that long, measured with the Manager's clock.
	// A process with Stdin or TTY may be quietly waiting for its caller, so
	// IdleTimeout applies to it only with IdleInteractive set; without, the
	// request is ErrInvalidRequest. 0 means no limit; negative is
	// ErrInvalidRequest.
	IdleTimeout time.Duration
	// IdleInteractive lets IdleTimeout apply to a process with Stdin or TTY:
	// silence counts as idleness even while it may be waiting for input.
	IdleInteractive bool
	// MaxOutput stops the process (like Stop, with ReasonOutputLimit) once
	// it has written more than that many bytes of output; what it wrote
	// stays readable as usual (head, tail and the output log). 0 means no
	// limit; negative is ErrInvalidRequest.
	MaxOutput int64
	// Sandbox confines the tree: the files it may read and write, its
	// network, the environment it inherits (see Sandbox). nil, the
	// default, takes the Manager's (WithSandbox), and without one the
	// tree runs with all of the host's authority. A policy this host
	// cannot enforce makes Start fail with ErrUnsupported unless
	// Sandbox.BestEffort is set. A detached process (Detach) is confined
	// like an attached one.
	Sandbox *Sandbox
	// Secrets are redacted in this process's output, in addition to the
	// Manager's (WithSecrets and the host's secret-looking variables):
	// each value reads "[redacted:NAME]". From Start on they are redacted
	// in the output of every other process of the Manager too, also of
	// those started before, for as long as the Manager lives: another
	// tree can read them from this one (its /proc/PID/cmdline). They are
	// not put in the process's environment. The rules on names and
	// values are WithSecrets'; a map breaking them is ErrInvalidRequest.
	// The values of Env whose names look like secrets are redacted too
	// (and those of Sandbox.Env.Set; the Manager's default policy's are
	// redacted in every stream),
	// but in the output of the processes of this request's owner only
	// (Scope), in a set bounded by MaxOwnerSecrets and
	// MaxOwnerSecretBytes that lets the oldest go which no running
	// process carries; a Start whose Env values and those of the owner's
	// running processes pass a bound is ErrInvalidRequest. All owners'
	// sets are bounded by MaxOwnerSets and MaxAllOwnersSecretBytes: past
	// them an owner with no running process loses its set, and a Start is
	// ErrInvalidRequest when the sets of owners with running processes
	// and its values pass one. Env values that are the Manager's (this
	// map's among them) are redacted in every stream. Ignored under
	// WithRedaction(false). nil, the default, adds nothing.
	Secrets map[string]string
}

// validate checks req and fills in the Manager's defaults, before Start
// takes a key, a running slot or any OS resource, as os/exec's Cmd.Start
// checks its Cmd first. The first check that fails is Start's error, so the
// order below is part of the behaviour: a request wrong in two ways reports
// the earlier one.
//
//  1. Command: not blank, no NUL (validateCommand).
//  2. Shell command: the Manager's shell would run all of it
//     (checkShellCommand, per OS). Background detection then rewrites the
//     command and sets Background (WithBackgroundDetection, unless
//     Verbatim), which is why the command is returned.
//  3. Env: keys and values (validateEnv); then WithSecrets and Secrets
//     (Manager.validateRedaction, redact.go).
//  4. Timeout: not negative (validateTimeout, timeout.go).
//  5. Ready: port range, Match compiles (to at most pattern.MaxInsts
//     instructions), ports supported here
//     (ReadyCheck.validate, observe.go).
//  6. Watchdog: IdleTimeout, IdleInteractive, MaxOutput (validateWatchdog,
//     watchdog.go).
//  7. Limits: filled from WithLimits, checked against its ceilings and the
//     platform (Manager.limitsFor, limits.go).
//  8. Detach: supported, a state dir, and nothing a detached process
//     cannot have (Manager.validateDetach, statedir.go; it sees the
//     filled-in Limits).
//  9. Sandbox: the request's, else WithSandbox's, validated
//     (Manager.sandboxFor, sandbox_run.go).
//  10. WorkDir: made absolute and checked to be a directory, or the
//     Manager's default (resolveWorkDir); returned as dir.
//  11. TTY: supported on this platform (ttySupported, pty_*.go). Its size
//     needs no check: a zero Rows or Cols is a default (TTYSize).
//
// Key is not checked here: any string is a key. After validate, Start
// looks it up (claimKey, keys.go) before it takes a slot. What is left
// for spawn to find out is what only the attempt can tell: the state dir,
// the sandbox's concrete policy, the output log, the cgroup, the pipes
// and the start itself.
func (m *Manager) validate(req *Request) (command, dir string, warnings []string, err error) {
	if command, err = validateCommand(req.Command); err != nil {
		return "", "", nil, err
	}
	if err := checkShellCommand(m.cfg.shell, command); err != nil {
		return "", "", nil, err
	}
	if m.cfg.bgDetect && !req.Verbatim && posixShell(m.cfg.shell) {
		command, req.Background, warnings = detectBackground(command, req.Background)
	}
	if err := validateEnv(req.Env); err != nil {
		return "", "", nil, err
	}
	if err := m.validateRedaction(*req); err != nil {
		return "", "", nil, err
	}
	if err := validateTimeout(req.Timeout); err != nil {
		return "", "", nil, err
	}
	if err := req.Ready.validate(m.portsAvailable); err != nil {
		return "", "", nil, err
	}
	if err := validateWatchdog(*req); err != nil {
		return "", "", nil, err
	}
	if req.Limits, err = m.limitsFor(req.Limits); err != nil {
		return "", "", nil, err
	}
	if err := m.validateDetach(*req); err != nil {
		return "", "", nil, err
	}
	if req.Sandbox, err = m.sandboxFor(*req); err != nil {
		return "", "", nil, err
	}
	if dir, err = m.resolveWorkDir(req.WorkDir); err != nil {
		return "", "", nil, err
	}
	if req.TTY != nil {
		if err := ttySupported(); err != nil {
			return "", "", nil, err
		}
	}
	return command, dir, warnings, nil
}

// validateCommand checks Request.Command.
func validateCommand(command string) (string, error) {
	if strings.TrimSpace(command) == "" {
		return "", xerrors.Errorf("empty command: %w", ErrInvalidRequest)
	}
	if strings.ContainsRune(command, 0) {
		return "", xerrors.Errorf("command contains a NUL byte: %w", ErrInvalidRequest)
	}
	return command, nil
}

// validateEnv checks the keys and values of an environment map
// (Request.Env, Sandbox.Env.Set).
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

// hasDotDot reports whether p has a ".." component.
func hasDotDot(p string) bool {
	return slices.Contains(strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }), "..")
}

// resolveWorkDir returns the directory a request runs in.
func (m *Manager) resolveWorkDir(dir string) (string, error) {
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", xerrors.Errorf("work dir %q: %v: %w", dir, err, ErrInvalidRequest)
		}
		if hasDotDot(dir) {
			// filepath.Abs applied ".." to the name, but the kernel applies
			// it to where a link led: ws/link/../x is x beside the link's
			// target. The work dir is the one the kernel (and a sandbox's
			// check, Sandbox.InWrite) finds.
			if !filepath.IsAbs(dir) {
				wd, _ := os.Getwd()
				dir = wd + string(filepath.Separator) + dir
			}
			abs = resolvePath(dir)
		}
		st, err := os.Stat(abs)
		// The errors name dir, the caller's, and never abs: with ".." it is
		// where the tree's links lead, text the tree wrote that no
		// redaction has seen (thirteenth attack review,
		// TestAttackWorkDirCarriesSecret).
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
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

// posixShell reports whether shell[0] names a shell that parses sh syntax,
// so that AnalyzeCommand's reading of the command is the shell's.
func posixShell(shell []string) bool {
	name := strings.ToLower(filepath.Base(shell[0]))
	switch strings.TrimSuffix(name, ".exe") {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox":
		return true
	}
	return false
}

// detectBackground applies AnalyzeCommand to a validated command. A command
// that does not parse, or whose stripped form would be empty, is returned
// unchanged and not promoted.
func detectBackground(command string, background bool) (string, bool, []string) {
	// Without any of these substrings AnalyzeCommand can find nothing, and
	// parsing costs more than the rest of Start for a short command.
	if !strings.Contains(command, "&") && !strings.Contains(command, "nohup") &&
		!strings.Contains(command, "setsid") && !strings.Contains(command, "disown") {
		return command, background, nil
	}
	a, err := AnalyzeCommand(command)
	if err != nil {
		return command, background, nil
	}
	if a.Background && strings.TrimSpace(a.Command) != "" {
		return a.Command, true, a.Warnings
	}
	return command, background, a.Warnings
}
