package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/llmtool"
)

// newFlags returns a FlagSet whose --help prints usage (the line after
// "agentproc NAME"), the flags, then help, which holds the description and
// the examples.
func newFlags(name, usage, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage:\n  agentproc %s %s\n\n", name, usage)
		desc, examples, _ := strings.Cut(help, "\nExamples:\n")
		fmt.Fprint(w, desc)
		fmt.Fprintln(w, "\nFlags:")
		fs.VisitAll(func(f *flag.Flag) {
			kind, text := flag.UnquoteUsage(f)
			dash := "-"
			if len(f.Name) > 1 {
				dash = "--"
			}
			line := "  " + dash + f.Name
			if kind != "" {
				line += " " + kind
			}
			fmt.Fprintf(w, "%-24s %s", line, text)
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(w)
		})
		if examples != "" {
			fmt.Fprint(w, "\nExamples:\n"+examples)
		}
	}
	return fs
}

// parse parses args with flags anywhere, as docker and kubectl allow
// (logs ID -f); everything after a "--" is an argument. It returns the
// arguments, and a usageError when there are not at least minArgs. --help
// prints the usage to stdout and returns flag.ErrHelp.
func parse(fs *flag.FlagSet, e *env, args []string, minArgs int) ([]string, error) {
	var tail []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	var rest []string
	for {
		if err := parseFlags(fs, e, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		rest, args = append(rest, args[0]), args[1:]
	}
	rest = append(rest, tail...)
	if len(rest) < minArgs {
		return nil, usagef("want %d argument(s), got %d", minArgs, len(rest))
	}
	return rest, nil
}

// parseFlags is fs.Parse with --help printed to stdout (flag.ErrHelp
// returned) and other errors returned as usageErrors, printed by run.
func parseFlags(fs *flag.FlagSet, e *env, args []string) error {
	if e.listFlags != nil {
		// Shell completion asks for the flags (completion.go).
		fs.VisitAll(func(f *flag.Flag) {
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			*e.listFlags = append(*e.listFlags, dash+f.Name)
		})
		return errFlagsListed
	}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(e.stdout)
		fs.Usage()
		return flag.ErrHelp
	}
	if err != nil {
		return usageError{err.Error()}
	}
	return nil
}

// noArgs refuses arguments left after the flags of a command that takes
// none: agentproc mcp ~/project must not run in the current directory.
func noArgs(rest []string) error {
	if len(rest) > 0 {
		return usagef("unexpected argument %q: this command takes flags only", rest[0])
	}
	return nil
}

// byteSize is a flag holding a size in bytes, written as 1048576, 64KiB,
// 512MiB or 2GiB (K, M and G are binary too).
type byteSize int64

func (b *byteSize) String() string { return fmt.Sprint(int64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// parseSize reads 1048576, 64KiB, 512MiB, 2GiB, 64K, 512M, 2G or "none" (0).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "none" {
		return 0, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size such as 64KiB, 512MiB or 2GiB", s)
	}
	return int64(n * float64(mult)), nil
}

// managerFlags are the flags mcp and serve share: how the Manager runs
// processes.
type managerFlags struct {
	workdir  string
	grace    time.Duration
	memory   byteSize
	procs    int
	cpu      float64
	head     byteSize
	tail     byteSize
	maxLine  int
	stateDir string
	session  string // this session's dir under stateDir (statedir.go)
	// maxRunning is --max-running: mcp's Manager is one session's, so it
	// is the Manager's cap; serve applies it per owner (maxrunning.go).
	maxRunning int
	cgroup     string
	sandbox    string
	network    string
	hosts      hostList // --allow-host
}

// defaultMaxRunning is --max-running's default: each background process
// costs the server memory (its output buffers and goroutines), and an
// agent in a loop can start many.
const defaultMaxRunning = 64

func (m *managerFlags) register(fs *flag.FlagSet, defaultWorkdir, maxRunningUsage string) {
	fs.StringVar(&m.workdir, "workdir", defaultWorkdir, "directory commands run in unless they name one")
	fs.DurationVar(&m.grace, "grace", 5*time.Second, "how long a stopped process may take to exit after SIGTERM before it is killed")
	fs.Var(&m.memory, "memory", "memory limit of each process tree, such as 2GiB (Linux: needs --cgroup; none by default)")
	fs.IntVar(&m.procs, "procs", 0, "most processes and threads of each tree at once (Linux: needs --cgroup; none by default)")
	fs.Float64Var(&m.cpu, "cpu", 0, "CPU limit of each tree in cores, such as 0.5 (Linux: needs --cgroup; none by default)")
	fs.StringVar(&m.cgroup, "cgroup", "", "cgroup v2 directory under which each process tree gets a cgroup of its own, such as /sys/fs/cgroup/agents (Linux)")
	m.head, m.tail = agentproc.DefaultHeadBytes, agentproc.DefaultTailBytes
	fs.Var(&m.head, "head", "bytes of long output kept at its start")
	fs.Var(&m.tail, "tail", "bytes of long output kept at its end")
	fs.IntVar(&m.maxLine, "max-line", agentproc.DefaultMaxLineBytes, "longest line shown whole; longer ones are cut")
	fs.IntVar(&m.maxRunning, "max-running", defaultMaxRunning, maxRunningUsage)
	fs.StringVar(&m.stateDir, "state-dir", "", "directory under which each session records its processes, so a later one stops what a crashed one left running; sessions may share it")
}

// registerSandbox adds --sandbox and --network; def is what an unset
// --sandbox means, for the help text.
func (m *managerFlags) registerSandbox(fs *flag.FlagSet, def string) {
	fs.StringVar(&m.sandbox, "sandbox", "", "workspace (commands write only in --workdir and a private temp dir, credentials hidden) or none; default: "+def)
	fs.StringVar(&m.network, "network", "", "with the workspace sandbox: none, loopback (a private one; needs root on Linux) or host; default: loopback where available, else host")
	fs.Var(&m.hosts, "allow-host", "with the workspace sandbox, reach only the hosts named, through a proxy (repeatable): name (ports 443 and 80), name:port, *.suffix or an IP or CIDR (Linux)")
}

// options returns the Manager options the flags ask for.
func (m *managerFlags) options() ([]agentproc.Option, error) {
	if m.grace <= 0 {
		return nil, usagef("--grace must be positive")
	}
	if m.maxRunning < 0 {
		return nil, usagef("--max-running must be 0 (no cap) or more")
	}
	if m.workdir != "" {
		// A mistyped directory is refused before anything runs: every
		// command would fail to start in it, or (before this check) the
		// sandbox was given up and commands ran elsewhere.
		fi, err := os.Stat(m.workdir)
		switch {
		case err != nil:
			return nil, usagef("--workdir %s: %v", m.workdir, errors.Unwrap(err))
		case !fi.IsDir():
			return nil, usagef("--workdir %s is not a directory", m.workdir)
		}
	}
	opts := []agentproc.Option{
		agentproc.WithGracePeriod(m.grace),
		agentproc.WithOutputLimits(int(m.head), int(m.tail), m.maxLine),
	}
	if m.workdir != "" {
		dir := m.workdir
		opts = append(opts, agentproc.WithWorkDir(func() string { return dir }))
	}
	if l := (agentproc.Limits{Memory: int64(m.memory), Procs: m.procs, CPU: m.cpu}); !l.IsZero() {
		opts = append(opts, agentproc.WithLimits(l))
	}
	if err := m.newSession(); err != nil {
		return nil, err
	}
	if m.session != "" {
		opts = append(opts, agentproc.WithStateDir(m.session))
	}
	if m.cgroup != "" {
		opts = append(opts, agentproc.WithCgroup(m.cgroup))
	}
	return opts, nil
}

// toolOptions returns the llmtool Options that state these settings.
func (m *managerFlags) toolOptions(maxOutput int64, sb *agentproc.Sandbox) llmtool.Options {
	if maxOutput == 0 {
		maxOutput = -1
	}
	return llmtool.Options{HeadBytes: int(m.head), TailBytes: int(m.tail), MaxOutput: maxOutput, Sandbox: sb}
}
