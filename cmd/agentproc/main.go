// Command agentproc makes agentproc available to any agent and to the person
// watching it: an MCP server over stdio (agentproc mcp), the HTTP API on a
// Unix socket or a TCP address (agentproc serve), and a client of that API
// (agentproc ps, logs, stop, run, wait, inspect, input, rm, prune).
//
//	agentproc mcp                      # an MCP server for Claude Code, Codex, Cursor, ...
//	agentproc serve &                  # the HTTP API on a Unix socket only you can open
//	agentproc run -d -- npm run dev    # start a process there
//	agentproc ps                       # what runs, like docker ps
//	agentproc logs -f 3f2a             # follow its output
//	agentproc stop --all               # stop everything
//
// Run agentproc help, or agentproc COMMAND --help, for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/agentproc/agentproc/httpapi"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit codes, as scripts expect them: 0 for success, 1 for a failure, 2 for
// a command line that could not be understood. run -- CMD exits with the
// command's own code.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what a subcommand works with: its streams, so tests can run the
// command in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// listFlags, when set, makes parsing list the command's flags here and
	// end the command (shell completion).
	listFlags *[]string
}

var commands = []command{
	{"mcp", "serve the tools over the Model Context Protocol on stdin and stdout", runMCP},
	{"serve", "serve the HTTP API on a Unix socket (default) or a TCP address", runServe},
	{"ps", "list the processes of a serve", runPS},
	{"logs", "print (or follow with -f) the output of a process", runLogs},
	{"stop", "stop a process, or all of them", runStop},
	{"run", "start a command and show its output (or -d: print its ID)", runRun},
	{"wait", "wait until a process exits; exit with its code", runWait},
	{"inspect", "print what the serve knows of processes, as JSON", runInspect},
	{"input", "write to the stdin of a process started with run -i", runInput},
	{"rm", "remove exited processes and their output (-f: stop it first)", runRm},
	{"prune", "remove every exited process", runPrune},
	{"completion", "print a shell completion script (bash, zsh, fish)", runCompletion},
	{"man", "print the manual page (roff)", nil}, // run set in man.go's init
	{"version", "print the version", runVersion},
}

const mainUsage = `agentproc runs and supervises commands for coding agents: background
processes that survive the turn, waits for a port or a line instead of
sleeping, only new output, input to a prompt, whole trees stopped.

Usage:
  agentproc COMMAND [flags] [args]

Commands:
%s
Flags:
  -h, --help     show this help
  -v, --version  print the version

Examples:
  # An MCP server for an agent (put this in the agent's MCP settings):
  agentproc mcp --workdir /path/to/project

  # The HTTP API for people and scripts, and the client commands:
  agentproc serve &
  agentproc run -d -- python3 -m http.server 8000
  agentproc ps
  agentproc logs -f 3f2a
  agentproc stop --all

Run 'agentproc COMMAND --help' for a command's flags and examples.
`

// run is the whole program: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		printMainUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return run([]string{args[1], "--help"}, stdin, stdout, stderr)
		}
		printMainUsage(stdout)
		return exitOK
	case "-v", "-version", "--version":
		args[0] = "version"
	case "__complete":
		runComplete(context.Background(), e, args[1:])
		return exitOK
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		// SIGINT, SIGTERM and SIGHUP end the command's context: mcp and
		// serve stop what they run, run -- CMD passes the signal on. A
		// SIGHUP (the terminal of agentproc serve & closed) used to end
		// them at once, leaving every process running.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		defer stop()
		err := c.run(ctx, e, args[1:])
		var ec exitCode
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &ec):
			return int(ec)
		case errors.As(err, new(usageError)):
			fmt.Fprintf(stderr, "agentproc %s: %v\nRun 'agentproc %s --help' for usage.\n", c.name, err, c.name)
			return exitUsage
		}
		fmt.Fprintf(stderr, "agentproc %s: %v\n", c.name, plainError(err))
		return exitError
	}
	fmt.Fprintf(stderr, "agentproc: unknown command %q\nRun 'agentproc --help' for usage.\n", args[0])
	return exitUsage
}

func printMainUsage(w io.Writer) {
	var sb strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&sb, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, mainUsage, sb.String())
}

// plainError is err as a person reads it: the reason a request to the
// serve failed, without the HTTP client's wrapping (the method, the URL of
// the socket's made-up host), and a reply's message without the package
// prefix; the status stays where it says something (401, 404).
func plainError(err error) error {
	var he *httpapi.Error
	if errors.As(err, &he) {
		msg := he.Message
		if he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden {
			msg = fmt.Sprintf("%d %s: %s", he.StatusCode, http.StatusText(he.StatusCode), msg)
		}
		if he.Detail != "" {
			msg += " (" + he.Detail + ")"
		}
		return errors.New(msg)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// exitCode is an error that is only an exit code: the command has said
// what there was to say, or the code is a child's.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// usageError is a command line that could not be understood.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlags("version", "", `Print the version of agentproc and of the library it was built with.

Examples:
  agentproc version
  agentproc --version
`)
	if rest, err := parse(fs, e, args, 0); err != nil {
		return err
	} else if err := noArgs(rest); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "agentproc", version())
	return nil
}

// version is the module version go install recorded, with the library's and
// the VCS revision a build from a checkout records.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/agentproc/agentproc" {
			lib := d.Version
			if d.Replace != nil {
				lib = "local " + d.Replace.Path
			}
			v += ", library " + lib
		}
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += ", revision " + s.Value[:12]
		}
	}
	return v + ", " + bi.GoVersion
}
