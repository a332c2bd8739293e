package llmtool

import (
	"fmt"
	"strings"

	"github.com/agentproc/agentproc"
)

// A result is the text of one tool call: "name: value" lines a model (and a
// test) reads at a glance, then the output, if any, after a line of its own.
// It is plain text rather than JSON: models read prose and output better than
// escaped strings, and a newline in the output stays a newline.
type result struct {
	sb strings.Builder
}

// field adds a "name: value" line; an empty value adds nothing.
func (r *result) field(name, value string) {
	if value == "" {
		return
	}
	fmt.Fprintf(&r.sb, "%s: %s\n", name, value)
}

// output adds the output section: a header saying where to read next and
// what was left out, then the text itself.
func (r *result) output(text string, next, omitted int64) {
	r.field("next", fmt.Sprint(next))
	switch {
	case text == "":
		r.sb.WriteString("output: (no new output)\n")
		return
	case omitted > 0:
		fmt.Fprintf(&r.sb, "output (truncated: %s from the middle were dropped where marked; the start and the end are kept):\n", plural(omitted, "byte"))
	default:
		r.sb.WriteString("output:\n")
	}
	r.sb.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		r.sb.WriteString("\n[no newline at the end]\n")
	}
}

func (r *result) String() string { return r.sb.String() }

// state says in words what a process is doing or how it ended, with the exit
// code a script would see: "exited with code 0", "killed by SIGTERM (exit
// code 143)", "killed: out of memory (limit 64 MiB); ... (exit code 137)".
func state(info agentproc.Info) string {
	if info.Running {
		s := "running"
		if info.Background {
			s += " in the background"
		}
		if info.AwaitingInput {
			s += ", waiting for input on stdin (answer with process_input)"
		}
		return s
	}
	code := ""
	if info.ExitCode != nil {
		code = fmt.Sprintf(" (exit code %d)", *info.ExitCode)
	}
	if why := ended(info); why != "" {
		return why + code
	}
	switch info.Reason {
	case agentproc.ReasonExited:
		if info.ExitCode != nil {
			return fmt.Sprintf("exited with code %d", *info.ExitCode)
		}
		return "exited"
	case agentproc.ReasonKilled:
		if info.ExitSignal != "" {
			return "stopped by " + info.ExitSignal + " as asked" + code
		}
		return "stopped as asked" + code
	case agentproc.ReasonSignaled:
		return "killed by " + info.ExitSignal + ", which was not sent through these tools" + code
	case agentproc.ReasonShutdown:
		return "stopped: the server shut down" + code
	case agentproc.ReasonOrphaned:
		return "stopped: the server that started it had died"
	}
	return string(info.Reason) + code
}

// ended says in one sentence why a process ended, where the reason alone
// would leave a model guessing: "killed: out of memory (limit 64 MiB)"
// teaches more than exit code 137. It is "" for a plain exit, a stop the
// model asked for, and a running process.
func ended(info agentproc.Info) string {
	switch {
	case info.Running:
		return ""
	case info.Reason == agentproc.ReasonOOM:
		s := "killed: out of memory"
		if info.Limits.Memory > 0 {
			s += fmt.Sprintf(" (limit %s)", size(info.Limits.Memory))
		}
		return s + "; use less memory, for example by processing the input in parts"
	case info.LikelyOOM:
		return "killed by SIGKILL, probably because the machine ran out of memory; use less memory"
	case info.Reason == agentproc.ReasonTimeout:
		return fmt.Sprintf("stopped: it was still running when its timeout of %s passed", info.Timeout)
	case info.Reason == agentproc.ReasonIdle:
		return fmt.Sprintf("stopped: it wrote no output for %s", info.IdleTimeout)
	case info.Reason == agentproc.ReasonOutputLimit:
		return fmt.Sprintf("stopped: its output passed %s; the start and the end are kept; "+
			"redirect large output to a file and read the parts you need", size(info.MaxOutput))
	}
	return ""
}

// plural writes "1 byte", "2 bytes".
func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// blocked ends a result with what the sandbox refused the process, one
// line each: the target, the rule, and the smallest change to the policy
// that would allow it (agentproc.DenialHint), which only the user can
// make. A model that meets a bare "Permission denied" tends to ask for the
// sandbox to be turned off; this names the one host or path instead.
func (r *result) blocked(ds []agentproc.Denial) {
	if len(ds) == 0 {
		return
	}
	r.sb.WriteString("blocked: the sandbox refused the following; errors in the output about them come from it, and retrying will not help:\n")
	for _, d := range ds {
		times := ""
		if d.Count > 1 {
			times = fmt.Sprintf(" (%d times)", d.Count)
		}
		fmt.Fprintf(&r.sb, "- %s %s: %s%s; what would allow it: %s\n", d.Op, d.Target, d.Rule, times, agentproc.DenialHint(d))
	}
}
