package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// clientFlags say which serve a client command talks to.
type clientFlags struct {
	socket string
	url    string
	token  tokenFlags
	owner  string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.socket, "socket", "", "Unix socket of the serve (default $"+socketEnv+", or serve's default)")
	fs.StringVar(&c.url, "url", os.Getenv("AGENTPROC_URL"), "URL of a serve --listen instead, such as http://127.0.0.1:7070 (default $AGENTPROC_URL)")
	c.token.register(fs, "file holding the bearer token of that serve (default $"+tokenEnv+")")
	fs.StringVar(&c.owner, "owner", "", "act for this owner (an agent's name); by default, the processes started without one")
}

// client returns the httpapi.Client the flags describe.
func (c *clientFlags) client() (*httpapi.Client, error) {
	token, err := c.token.token()
	if err != nil {
		return nil, err
	}
	cl := &httpapi.Client{URL: c.url, Header: http.Header{}, HTTPClient: &http.Client{}}
	if c.url == "" {
		path := c.socket
		if path == "" {
			var err error
			if path, err = defaultSocket(false); err != nil {
				return nil, err
			}
			if os.Getenv(socketEnv) == "" {
				// The default directory gets serve's owner and mode check
				// before anything is sent: without $XDG_RUNTIME_DIR it is
				// under the shared temp dir, where another user could
				// have made it first, with their own server inside to
				// receive the command line and the token.
				if err := checkPrivateDir(filepath.Dir(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("not connecting to %s: %w", path, err)
				}
			}
		}
		// The host name is never resolved: every connection dials the
		// socket.
		cl.URL = "http://agentproc"
		cl.HTTPClient.Transport = &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				conn, err := d.DialContext(ctx, "unix", path)
				if err != nil {
					return nil, fmt.Errorf("no agentproc serve on %s (start one with agentproc serve): %w", path, err)
				}
				return conn, nil
			},
		}
	}
	if token != "" {
		cl.Header.Set("Authorization", "Bearer "+token)
	}
	if c.owner != "" {
		cl.Header.Set(httpapi.DefaultOwnerHeader, c.owner)
	}
	return cl, nil
}

// resolve turns an ID or a unique prefix of one, as ps shows it, into the
// full ID.
func resolve(ctx context.Context, cl *httpapi.Client, id string) (string, error) {
	procs, err := cl.List(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for _, p := range procs {
		if p.ID == id {
			return id, nil
		}
		if strings.HasPrefix(p.ID, id) {
			found = append(found, p.ID)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no process %q (agentproc ps -a lists them)", id)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%q names %d processes; give more of the ID", id, len(found))
}

const psHelp = `List the processes of a serve, running ones first, then the newest: a
table like docker ps, or JSON with --json. Exited processes are listed
with -a, until the serve's retention drops them.

Examples:
  agentproc ps
  agentproc ps -a
  agentproc ps -q            # IDs only, for scripts
  agentproc ps --json | jq '.[] | select(.running) | .id'
`

func runPS(ctx context.Context, e *env, args []string) error {
	fs := newFlags("ps", "[flags]", psHelp)
	var cf clientFlags
	cf.register(fs)
	all := fs.Bool("a", false, "list exited processes too")
	fs.BoolVar(all, "all", false, "list exited processes too")
	asJSON := fs.Bool("json", false, "print the processes as a JSON array (httpapi.Process), all of them")
	quiet := fs.Bool("q", false, "print IDs only")
	noTrunc := fs.Bool("no-trunc", false, "print full IDs and commands")
	cl, err := noProcess(fs, &cf, e, args)
	if err != nil {
		return err
	}
	procs, err := cl.List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if procs == nil {
			procs = []httpapi.Process{}
		}
		return enc.Encode(procs)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 3, ' ', 0)
	if !*quiet {
		fmt.Fprintln(tw, "ID\tCOMMAND\tCREATED\tSTATUS\tPORTS")
	}
	for _, p := range procs {
		if !*all && !p.Running {
			continue
		}
		id, command := p.ID, p.Command
		if !*noTrunc {
			id = shortID(id)
			command = truncate(command, 40)
		}
		if *quiet {
			fmt.Fprintln(tw, id)
			continue
		}
		fmt.Fprintf(tw, "%s\t%q\t%s ago\t%s\t%s\n", id, command, ago(now, p.StartedAt), status(now, p), ports(p.Ports))
	}
	return tw.Flush()
}

// shortID is the first group of a UUID, 8 hex digits, as docker shows a
// short ID; every command takes a unique prefix.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// ago says how long ago a Unix time was, as docker does.
func ago(now time.Time, unix int64) string {
	d := now.Sub(time.Unix(unix, 0))
	n, unit := int(d.Hours()/24), "day"
	switch {
	case d < time.Minute:
		n, unit = int(d.Seconds()), "second"
	case d < time.Hour:
		n, unit = int(d.Minutes()), "minute"
	case d < 48*time.Hour:
		n, unit = int(d.Hours()), "hour"
	}
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// status is docker's STATUS column: "Up 5 seconds", "Exited (0) 3 seconds
// ago", with why where the reason is not a plain exit.
func status(now time.Time, p httpapi.Process) string {
	if p.Running {
		s := "Up " + ago(now, p.StartedAt)
		if p.AwaitingInput {
			s += " (waiting for input)"
		}
		return s
	}
	code := "?"
	if p.ExitCode != nil {
		code = fmt.Sprint(*p.ExitCode)
	}
	s := "Exited (" + code + ")"
	if p.ExitedAt != nil {
		s += " " + ago(now, *p.ExitedAt) + " ago"
	}
	if p.Reason != "" && p.Reason != agentproc.ReasonExited {
		s += ", " + string(p.Reason)
		if p.Signal != "" {
			s += " by " + p.Signal
		}
	}
	return s
}

func ports(ps []agentproc.Port) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s:%d/%s", p.Addr, p.Port, strings.TrimSuffix(p.Network, "6")))
	}
	return strings.Join(out, ", ")
}

const logsHelp = `Print the output of a process: what the serve kept of it (the start and
the end of long output). With -f, follow it: print new output as it is
written, until the process exits or you press Ctrl-C. ID may be a unique
prefix, as ps shows it. On a terminal, colours are kept and every other
control sequence (clipboard and title writes, screen control) is dropped;
to a pipe or a file the output is written unchanged.

The output carries no timestamps: --since finds its start from marks the
serve keeps of when output was written, so it may begin up to a second
early (more for a process that has written steadily for minutes).

Examples:
  agentproc logs 3f2a
  agentproc logs -f 3f2a
  agentproc logs --since 10m 3f2a
  agentproc logs --plain 3f2a   # colours and progress redraws rendered away
`

func runLogs(ctx context.Context, e *env, args []string) error {
	fs := newFlags("logs", "[flags] ID", logsHelp)
	var cf clientFlags
	cf.register(fs)
	follow := fs.Bool("f", false, "follow the output until the process exits")
	fs.BoolVar(follow, "follow", false, "follow the output until the process exits")
	plain := fs.Bool("plain", false, "render terminal control sequences away (agentproc.PlainText)")
	tail := fs.Int("tail", -1, "print only the last N lines of what was kept (with -f, then follow)")
	fs.IntVar(tail, "n", -1, "same as --tail")
	var since sinceFlag
	fs.Var(&since, "since", "print only output written since then: a duration ago (10m, 1h30m) or an RFC 3339 time (coarse: may begin up to a second earlier, more for a long-lived writer)")
	cl, id, err := oneProcess(ctx, fs, &cf, e, args)
	if err != nil {
		return err
	}
	w := terminalSafe(e.stdout)
	var from int64
	if !*follow || *tail >= 0 || since.set {
		out, err := cl.Output(ctx, id, httpapi.OutputOptions{Plain: *plain, Offset: new(int64), Since: since.at()})
		if err != nil {
			return err
		}
		if out.Position == nil {
			return errNoOffsets
		}
		if _, err := io.WriteString(w, lastLines(out.Output, *tail)); err != nil || !*follow {
			return err
		}
		from = out.Next
	}
	_, err = followOutput(ctx, cl, id, from, *plain, w)
	if ctx.Err() != nil {
		// Ctrl-C ends following, as docker logs -f: not a failure.
		return nil
	}
	return err
}

// sinceFlag is logs --since: a duration before now, or an RFC 3339 time,
// as docker logs --since takes them.
type sinceFlag struct {
	set bool
	ago time.Duration
	t   time.Time
}

func (f *sinceFlag) String() string { return "" }

func (f *sinceFlag) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		f.set, f.ago, f.t = true, d, time.Time{}
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("%q: want a duration such as 10m or an RFC 3339 time such as 2026-11-27T09:00:00Z", s)
	}
	f.set, f.ago, f.t = true, 0, t
	return nil
}

// at is the time the flag names, the zero time when it was not given.
func (f *sinceFlag) at() time.Time {
	switch {
	case !f.set:
		return time.Time{}
	case f.t.IsZero():
		return time.Now().Add(-f.ago)
	}
	return f.t
}

// errNoOffsets is a reply to an offset read that carries no offsets: a
// server of another version, or something else on the socket.
var errNoOffsets = errors.New("the server's output reply has no offsets (is it an agentproc serve of this version?)")

// followOutput writes id's output to w from the start, as it is written,
// until the process exits, and returns its final state. Each read blocks on
// the serve until there is more (?follow=true), so a quiet process costs
// one held request, not a poll.
func followOutput(ctx context.Context, cl *httpapi.Client, id string, from int64, plain bool, w io.Writer) (httpapi.Output, error) {
	off := from
	atPrompt := false
	for {
		opts := httpapi.OutputOptions{Offset: &off, Follow: true, Plain: plain}
		if atPrompt {
			// A follow returns at once while the process waits for input.
			// The answer may come from elsewhere (agentproc input, run -i),
			// so look again every promptRecheck, printing what came,
			// rather than ask again at once or wait for the exit.
			opts = httpapi.OutputOptions{Offset: &off, Wait: true, Timeout: promptRecheck, Plain: plain}
		}
		out, err := cl.Output(ctx, id, opts)
		if err != nil {
			return out, err
		}
		if out.Position == nil {
			return out, errNoOffsets
		}
		if out.Omitted > 0 {
			fmt.Fprintf(w, "\n[... %d bytes omitted ...]\n", out.Omitted)
		}
		if _, err := io.WriteString(w, out.Output); err != nil {
			return out, err
		}
		if out.EOF {
			return out, nil
		}
		atPrompt = out.Output == "" && out.AwaitingInput
		off = out.Next
	}
}

// promptRecheck is how often a follow looks for output while the process
// waits for input.
const promptRecheck = time.Second

const stopHelp = `Stop a process and everything it started: SIGTERM, then SIGKILL if it has
not exited after --time. With --all, stop every running process at once
(the serve's grace period). ID may be a unique prefix, as ps shows it. The
IDs stopped are printed.

Examples:
  agentproc stop 3f2a
  agentproc stop --time 2s 3f2a 9b1c
  agentproc stop --all
`

func runStop(ctx context.Context, e *env, args []string) error {
	fs := newFlags("stop", "[flags] ID... | --all", stopHelp)
	var cf clientFlags
	cf.register(fs)
	all := fs.Bool("all", false, "stop every running process")
	grace := fs.Duration("time", 10*time.Second, "how long to wait after SIGTERM before SIGKILL (0: SIGKILL at once)")
	ids, err := parse(fs, e, args, 0)
	if err != nil {
		return err
	}
	if *all == (len(ids) > 0) {
		return usagef("give process IDs or --all")
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	if *all {
		procs, err := cl.StopAll(ctx)
		for _, p := range procs {
			fmt.Fprintln(e.stdout, p.ID)
		}
		return err
	}
	var failed error
	for _, arg := range ids {
		if err := stopOne(ctx, cl, arg, *grace); err != nil {
			fmt.Fprintf(e.stderr, "agentproc stop: %v\n", plainError(err))
			failed = exitCode(exitError)
			continue
		}
		fmt.Fprintln(e.stdout, arg)
	}
	return failed
}

// stopOne is docker stop: terminate, wait up to grace, kill; with no
// grace, kill at once (docker stop -t 0, docker rm -f).
func stopOne(ctx context.Context, cl *httpapi.Client, arg string, grace time.Duration) error {
	id, err := resolve(ctx, cl, arg)
	if err != nil {
		return err
	}
	if grace > 0 {
		if err := cl.Signal(ctx, id, agentproc.SignalTerminate); err != nil {
			var he *httpapi.Error
			if errors.As(err, &he) && he.StatusCode == http.StatusConflict {
				return nil // exited already: stopped is what was asked
			}
			return err
		}
		out, err := cl.Output(ctx, id, httpapi.OutputOptions{Wait: true, Timeout: grace, Offset: new(int64)})
		if err != nil {
			return err
		}
		if !out.Running {
			return nil
		}
	}
	if err := cl.Signal(ctx, id, agentproc.SignalKill); err != nil {
		var he *httpapi.Error
		if errors.As(err, &he) && he.StatusCode == http.StatusConflict {
			return nil
		}
		return err
	}
	// The serve caps one wait; a killed tree is gone well within it.
	_, err = cl.Output(ctx, id, httpapi.OutputOptions{Wait: true, Offset: new(int64)})
	return err
}

const runHelp = `Start a command on the serve, with sh -c, print its output as it is
written, and exit with its exit code, as docker run does. One argument is a
shell command as written; several are quoted so each stays one argument.
With -d, print the process ID and return at once; the process keeps running
on the serve (agentproc logs -f ID follows it, agentproc stop ID stops it).
On a terminal the output keeps its colours and loses every other control
sequence, as with logs.
Ctrl-C passes an interrupt to the command, which decides; SIGTERM and
SIGHUP stop it (terminate, then kill after 10 s) and run exits with 128+N.
Output that can no longer be written (the terminal closed, the reader of
a pipe such as | head left) stops it too (exit 141 for a closed pipe).

Examples:
  agentproc run -- make test
  agentproc run -- 'make && ./app --port 8080'
  agentproc run -d -- npm run dev
  agentproc run -d --ready-port 8000 -- python3 -m http.server 8000
  agentproc run --timeout 10m -- ./long-job.sh
`

func runRun(ctx context.Context, e *env, args []string) error {
	fs := newFlags("run", "[flags] -- COMMAND [ARG...]", runHelp)
	var cf clientFlags
	cf.register(fs)
	detach := fs.Bool("d", false, "print the ID and return; the process keeps running")
	fs.BoolVar(detach, "detach", false, "print the ID and return; the process keeps running")
	workdir := fs.String("workdir", "", "directory to run in (default: the serve's)")
	timeout := fs.Duration("timeout", 0, "stop the command after this long")
	var envs envFlag
	fs.Var(&envs, "e", "set an environment variable, KEY=VALUE (repeatable)")
	fs.Var(&envs, "env", "same as -e")
	interactive := fs.Bool("i", false, "keep stdin open: attached, agentproc's stdin is passed on; with -d, answer with agentproc input")
	readyPort := fs.Int("ready-port", -1, "with -d, return once the command listens on this port (0: any)")
	readyTimeout := fs.Duration("ready-timeout", time.Minute, "with --ready-port, give up after this long (exit 1; the command keeps running)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usagef("no command: agentproc run [flags] -- COMMAND")
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	req := httpapi.StartRequest{Command: shellCommand(argv), WorkDir: *workdir, Background: *detach, Env: envs.m, Stdin: *interactive}
	if *timeout > 0 {
		req.Timeout = timeout.String()
	}
	// Registered before the start, so that a signal that comes while it
	// is under way waits in sigs instead of ending run (SIGHUP's default)
	// with the command left running.
	sigs := make(chan os.Signal, 4)
	if !*detach {
		signal.Notify(sigs, forwardedSignals...)
		defer signal.Stop(sigs)
	}
	startCtx := ctx
	if !*detach {
		// A SIGTERM also ends ctx; the start still completes, so that
		// the signal, waiting in sigs, stops what was started.
		startCtx = context.WithoutCancel(ctx)
	}
	resp, err := cl.Start(startCtx, req)
	if err != nil {
		return err
	}
	for _, w := range resp.Warnings {
		fmt.Fprintln(e.stderr, "agentproc run: warning:", w)
	}
	if *detach {
		return reportDetached(ctx, e, cl, resp.ID, *readyPort, *readyTimeout)
	}
	return runAttached(ctx, e, cl, resp.ID, sigs, *interactive)
}

// reportDetached prints the ID of the detached process id, once it
// listens on readyPort when that is 0 or more.
func reportDetached(ctx context.Context, e *env, cl *httpapi.Client, id string, readyPort int, readyTimeout time.Duration) error {
	if readyPort >= 0 {
		out, err := waitReady(ctx, cl, id, readyPort, readyTimeout)
		if err != nil {
			return err
		}
		if out.Port == nil {
			if out.Running {
				return fmt.Errorf("%s did not listen on port %d within %s; it is still running (agentproc logs %s shows why, agentproc stop %s stops it)",
					id, readyPort, readyTimeout, shortID(id), shortID(id))
			}
			return fmt.Errorf("%s did not listen on port %d (%s)", id, readyPort, exitState(out))
		}
	}
	fmt.Fprintln(e.stdout, id)
	return nil
}

// runAttached follows the attached process id's output to its end,
// passing on the signals in sigs, and returns its exit as run's.
func runAttached(ctx context.Context, e *env, cl *httpapi.Client, id string, sigs <-chan os.Signal, interactive bool) error {
	// Attached: the signals that end a foreground command reach the
	// remote one, and the output is followed to its end either way.
	// SIGINT (Ctrl-C) is passed on as an interrupt, and the command
	// decides; SIGTERM (kill, timeout, a CI cancel, a service stop) and
	// SIGHUP (the terminal closed) stop it as stop does, and run then
	// exits with 128+N, as a shell reports a command a signal ended.
	// Output that can no longer be written (the terminal closed, the
	// reader of a pipe such as | head exited) stops it too: nobody sees
	// it any more.
	//
	// The stop runs on a context of its own, bounded, and run waits for
	// it: the follow may end first (a write fails as the terminal
	// hangs up), and ending the stop with it left the command running.
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var stoppedBy atomic.Int32
	var stopOnce sync.Once
	stopped := make(chan struct{})
	stop := func() {
		stopOnce.Do(func() {
			go func() {
				defer close(stopped)
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopGrace+stopAfterKill)
				defer cancel()
				_ = stopOne(sctx, cl, id, stopGrace)
			}()
		})
	}
	// Without this, a write to a closed pipe on stdout would end run at
	// once by SIGPIPE (Go's default), leaving the command running; with
	// it, the write fails with EPIPE and run stops the command first.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case <-fctx.Done():
				return
			case sig := <-sigs:
				if sig == os.Interrupt {
					_ = cl.Signal(fctx, id, agentproc.SignalInterrupt)
					continue
				}
				if n, ok := sig.(syscall.Signal); ok {
					stoppedBy.CompareAndSwap(0, int32(n))
				}
				stop()
			}
		}
	}()
	if interactive {
		go forwardStdin(fctx, cl, id, e.stdin)
	}
	w := &outputWriter{w: terminalSafe(e.stdout)}
	out, err := followOutput(fctx, cl, id, 0, false, w)
	if w.err != nil {
		stop()
	}
	stopOnce.Do(func() { close(stopped) }) // no stop was asked: nothing to wait for
	<-stopped
	cancel()
	<-forwarded
	if n := stoppedBy.Load(); n != 0 {
		return exitCode(128 + int(n))
	}
	if w.err != nil {
		if errors.Is(w.err, syscall.EPIPE) {
			// What the shell reported when run died by SIGPIPE.
			return exitCode(128 + int(syscall.SIGPIPE))
		}
		return fmt.Errorf("writing the output: %w (%s was stopped)", w.err, shortID(id))
	}
	if err != nil {
		return err
	}
	if out.ExitCode == nil {
		return fmt.Errorf("%s ended without an exit code (%s)", id, exitState(out))
	}
	if *out.ExitCode != 0 {
		return exitCode(*out.ExitCode)
	}
	return nil
}

// waitReady waits until id listens on port, at most timeout, asking the
// serve again when its own cap on one wait ends the request first.
func waitReady(parent context.Context, cl *httpapi.Client, id string, port int, timeout time.Duration) (httpapi.Output, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	for {
		left := time.Until(deadlineOf(ctx))
		out, err := cl.Output(ctx, id, httpapi.OutputOptions{WaitPort: &port, Timeout: left, Offset: new(int64)})
		switch {
		case parent.Err() != nil:
			return out, parent.Err()
		case ctx.Err() != nil:
			return httpapi.Output{Running: true}, nil
		case err != nil:
			return out, err
		case out.Port != nil || !out.Running || !out.TimedOut:
			return out, nil
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// envFlag collects -e KEY=VALUE.
type envFlag struct{ m map[string]string }

func (f *envFlag) String() string { return "" }

func (f *envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", s)
	}
	if f.m == nil {
		f.m = map[string]string{}
	}
	f.m[k] = v
	return nil
}

// forwardedSignals are the signals run -- CMD passes on to the command.
var forwardedSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// stopGrace is how long run gives a command it stops on SIGTERM or SIGHUP
// after the terminate signal, before it is killed: stop's default.
const stopGrace = 10 * time.Second

// stopAfterKill bounds the rest of such a stop: the kill and the wait for
// the exit it brings.
const stopAfterKill = 10 * time.Second

// outputWriter passes run's output on and keeps the first error writing
// it (a closed terminal, a pipe whose reader left).
type outputWriter struct {
	w   io.Writer
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err != nil {
		o.err = err
	}
	return n, err
}

// shellCommand is the command line for argv: one argument is a shell
// command as written (run -- 'make && ./app'); several are quoted for sh so
// each stays one argument, as docker run keeps them (run -- sh -c 'a; b').
func shellCommand(argv []string) string {
	if len(argv) == 1 {
		return argv[0]
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes s for sh unless every byte is one sh never treats
// specially.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func exitState(out httpapi.Output) string {
	if out.Running {
		return "still running"
	}
	s := string(out.Reason)
	if out.Signal != "" {
		s += " by " + out.Signal
	}
	return s
}
