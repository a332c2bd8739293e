package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentproc/agentproc/httpapi"
)

// The verbs a person who lives in docker's and gh's CLIs expects beside
// ps, logs, stop and run: wait, inspect, input, rm and prune.

// oneProcess parses the command line of a command that names one process,
// by its ID or a unique prefix of one, and returns the client of the serve
// the flags name and the process's full ID.
func oneProcess(ctx context.Context, fs *flag.FlagSet, cf *clientFlags, e *env, args []string) (*httpapi.Client, string, error) {
	rest, err := parse(fs, e, args, 1)
	if err != nil {
		return nil, "", err
	}
	if len(rest) > 1 {
		return nil, "", usagef("one ID, please")
	}
	cl, err := cf.client()
	if err != nil {
		return nil, "", err
	}
	id, err := resolve(ctx, cl, rest[0])
	return cl, id, err
}

// noProcess parses the command line of a command that takes flags only and
// returns the client of the serve the flags name.
func noProcess(fs *flag.FlagSet, cf *clientFlags, e *env, args []string) (*httpapi.Client, error) {
	rest, err := parse(fs, e, args, 0)
	if err != nil {
		return nil, err
	}
	if err := noArgs(rest); err != nil {
		return nil, err
	}
	return cf.client()
}

const waitHelp = `Wait until a process exits and exit with its exit code, as docker wait
prints it. ID may be a unique prefix, as ps shows it. With --timeout, give
up after that long (exit 1; the process keeps running).

Examples:
  agentproc wait 3f2a
  agentproc wait --timeout 5m 3f2a && echo done
`

func runWait(ctx context.Context, e *env, args []string) error {
	fs := newFlags("wait", "[flags] ID", waitHelp)
	var cf clientFlags
	cf.register(fs)
	timeout := fs.Duration("timeout", 0, "give up after this long (default: wait until it exits)")
	cl, id, err := oneProcess(ctx, fs, &cf, e, args)
	if err != nil {
		return err
	}
	parent := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	for {
		// The serve caps one wait; ask again until the exit.
		out, err := cl.Output(ctx, id, httpapi.OutputOptions{Wait: true, Offset: new(int64)})
		if parent.Err() != nil {
			// Ctrl-C or SIGTERM, not the --timeout: say which, rather
			// than "after 0s".
			return fmt.Errorf("%v; %s is still running", context.Cause(parent), shortID(id))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s is still running after %s", shortID(id), *timeout)
		}
		if err != nil {
			return err
		}
		if out.Running {
			if !out.TimedOut {
				// A serve holds a wait until the exit or its own cap,
				// which it reports as timed out; anything else would
				// have this loop ask again and again, at full speed.
				return errWaitNotHeld
			}
			continue
		}
		code := -1
		if out.ExitCode != nil {
			code = *out.ExitCode
		}
		fmt.Fprintln(e.stdout, code)
		if code != 0 {
			return exitCode(max(code, 1))
		}
		return nil
	}
}

// errWaitNotHeld is a reply to a wait that came back while the process
// runs without saying the wait timed out: a server of another version, or
// something else on the socket.
var errWaitNotHeld = errors.New("the server ended a wait while the process runs, without a timeout (is it an agentproc serve of this version?)")

const inspectHelp = `Print what the serve knows of processes as a JSON array (httpapi.Process):
command, state, exit code and reason, ports, limits, times. IDs may be
unique prefixes, as ps shows them.

Examples:
  agentproc inspect 3f2a
  agentproc inspect 3f2a | jq '.[0].exit_code'
`

func runInspect(ctx context.Context, e *env, args []string) error {
	fs := newFlags("inspect", "[flags] ID...", inspectHelp)
	var cf clientFlags
	cf.register(fs)
	ids, err := parse(fs, e, args, 1)
	if err != nil {
		return err
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	procs := []httpapi.Process{}
	for _, arg := range ids {
		id, err := resolve(ctx, cl, arg)
		if err != nil {
			return err
		}
		p, err := cl.Get(ctx, id)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(procs)
}

const inputHelp = `Write to the standard input of a process started with run -i, such as the
answer to a prompt. TEXT is written with a newline after it (Enter) unless
-n is given; without TEXT, agentproc's own stdin is copied. --close ends
the input afterwards (Ctrl-D). ID may be a unique prefix, as ps shows it.

Examples:
  agentproc run -d -i -- ./install.sh
  agentproc logs 3f2a          # Continue? [y/N]
  agentproc input 3f2a y
  printf 'line 1\nline 2\n' | agentproc input --close 3f2a
`

func runInput(ctx context.Context, e *env, args []string) error {
	fs := newFlags("input", "[flags] ID [TEXT]", inputHelp)
	var cf clientFlags
	cf.register(fs)
	noNewline := fs.Bool("n", false, "do not add a newline after TEXT")
	closeIn := fs.Bool("close", false, "end the input after writing (the process reads EOF)")
	rest, err := parse(fs, e, args, 1)
	if err != nil {
		return err
	}
	if len(rest) > 2 {
		return usagef("give the ID and one TEXT (quote it to keep spaces)")
	}
	var data string
	if len(rest) == 2 {
		data = rest[1]
		if !*noNewline {
			data += "\n"
		}
	} else if !*closeIn {
		var sb strings.Builder
		if _, err := io.Copy(&sb, e.stdin); err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		data = sb.String()
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	id, err := resolve(ctx, cl, rest[0])
	if err != nil {
		return err
	}
	_, err = cl.WriteStdin(ctx, id, httpapi.StdinRequest{Data: data, Close: *closeIn})
	return err
}

const rmHelp = `Remove exited processes: the serve forgets them and their output at once,
as its retention would later. A running process is refused unless -f is
given, which stops it first (kill, or terminate and then kill after --time
when that is given). IDs may be unique prefixes, as ps shows them; the IDs
removed are printed.

Examples:
  agentproc rm 3f2a
  agentproc rm -f 3f2a 9b1c
  agentproc rm $(agentproc ps -a -q)   # running ones are refused and kept
`

func runRm(ctx context.Context, e *env, args []string) error {
	fs := newFlags("rm", "[flags] ID...", rmHelp)
	var cf clientFlags
	cf.register(fs)
	force := fs.Bool("f", false, "stop a running process first (kill at once, as docker rm -f)")
	fs.BoolVar(force, "force", false, "same as -f")
	grace := fs.Duration("time", 0, "with -f, terminate first and kill only after this long")
	ids, err := parse(fs, e, args, 1)
	if err != nil {
		return err
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	var failed error
	for _, arg := range ids {
		if err := removeOne(ctx, cl, arg, *force, *grace); err != nil {
			fmt.Fprintf(e.stderr, "agentproc rm: %v\n", plainError(err))
			failed = exitCode(exitError)
			continue
		}
		fmt.Fprintln(e.stdout, arg)
	}
	return failed
}

// removeOne is docker rm: refused while the process runs, unless force,
// which stops it first.
func removeOne(ctx context.Context, cl *httpapi.Client, arg string, force bool, grace time.Duration) error {
	id, err := resolve(ctx, cl, arg)
	if err != nil {
		return err
	}
	if force {
		if err := stopOne(ctx, cl, id, grace); err != nil {
			return err
		}
	}
	err = cl.Remove(ctx, id)
	if he, ok := errors.AsType[*httpapi.Error](err); ok && he.StatusCode == http.StatusConflict {
		return fmt.Errorf("%s is running: stop it first, or use rm -f", arg)
	}
	return err
}

const pruneHelp = `Remove every exited process and its output, as rm does for each; running
processes are kept. The IDs removed are printed, one a line.

When stdin is a terminal, prune first lists the exited processes and asks
"Remove N exited processes? [y/N]", as docker container prune does, and
removes just those on y. With -f, or when stdin is not a terminal (a
script, a pipe, an agent), it removes them without asking: nothing waits
for an answer no one will give.

Examples:
  agentproc prune
  agentproc prune -f
  agentproc prune --owner reviewer
`

func runPrune(ctx context.Context, e *env, args []string) error {
	fs := newFlags("prune", "[flags]", pruneHelp)
	var cf clientFlags
	cf.register(fs)
	force := fs.Bool("f", false, "do not ask for confirmation on a terminal")
	fs.BoolVar(force, "force", false, "same as -f")
	cl, err := noProcess(fs, &cf, e, args)
	if err != nil {
		return err
	}
	if *force || !isTerminal(e.stdin) {
		removed, err := cl.Prune(ctx)
		for _, p := range removed {
			fmt.Fprintln(e.stdout, p.ID)
		}
		return err
	}
	return pruneAsking(ctx, cl, e)
}

// pruneAsking lists the exited processes on stderr, asks the person at the
// terminal on stdin, and on yes removes those listed, one by one: a
// process that exits while the question waits is not removed unseen, as
// POST /prune would.
func pruneAsking(ctx context.Context, cl *httpapi.Client, e *env) error {
	procs, err := cl.List(ctx)
	if err != nil {
		return err
	}
	var exited []httpapi.Process
	for _, p := range procs {
		if !p.Running {
			exited = append(exited, p)
		}
	}
	if len(exited) == 0 {
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stderr, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "ID\tCOMMAND\tSTATUS")
	for _, p := range exited {
		fmt.Fprintf(tw, "%s\t%q\t%s\n", shortID(p.ID), truncate(p.Command, 40), status(now, p))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "processes"
	if len(exited) == 1 {
		noun = "process"
	}
	fmt.Fprintf(e.stderr, "Remove %d exited %s? [y/N] ", len(exited), noun)
	answer, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if !strings.HasSuffix(answer, "\n") {
		fmt.Fprintln(e.stderr) // end the prompt's line after a ^D
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		fmt.Fprintln(e.stderr, "Nothing removed.")
		return nil
	}
	for _, p := range exited {
		err := cl.Remove(ctx, p.ID)
		if he, ok := errors.AsType[*httpapi.Error](err); ok && he.StatusCode == http.StatusNotFound {
			continue // removed meanwhile: by retention, or another rm or prune
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, p.ID)
	}
	return nil
}

// forwardStdin copies r to id's stdin as it is read, then closes it, until
// ctx ends: run -i attached.
func forwardStdin(ctx context.Context, cl *httpapi.Client, id string, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := cl.WriteStdin(ctx, id, httpapi.StdinRequest{Data: string(buf[:n])}); werr != nil {
				return
			}
		}
		if err != nil {
			_, _ = cl.WriteStdin(ctx, id, httpapi.StdinRequest{Close: true})
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// lastLines returns the last n lines of s (n < 0: all of it).
func lastLines(s string, n int) string {
	if n < 0 {
		return s
	}
	end := len(s)
	if strings.HasSuffix(s, "\n") {
		end--
	}
	i := end
	for range n {
		j := strings.LastIndexByte(s[:i], '\n')
		if j < 0 {
			return s
		}
		i = j
	}
	if n == 0 {
		return ""
	}
	return s[i+1:]
}
