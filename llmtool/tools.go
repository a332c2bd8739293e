// Package llmtool puts agentproc behind the tools a language model is given:
// execute, process_output, process_wait, process_input, process_list and
// process_signal, each with a JSON Schema and a description that teaches the
// model how to use it, and a dispatcher (Toolbox) that runs JSON tool calls
// against a Scope and answers in plain text a model reads well.
//
// It is the one definition of these tools: examples/llmtool replays a session
// against it, and the agentproc command serves it over the Model Context
// Protocol (agentproc mcp). It depends on nothing but the root package, so a
// program that imports it adds no module to its build.
package llmtool

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentproc/agentproc"
)

// Tool is one tool as a model API takes it: a name, a description that
// teaches the model when and how to use it, and a JSON Schema of its input.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
	// ReadOnly is true for a tool that changes nothing (an MCP
	// readOnlyHint); model APIs that take only the three fields above do
	// not see it.
	ReadOnly bool `json:"-"`
}

// Limits of the tools, stated in their descriptions too.
const (
	// ForegroundTimeout stops a foreground command that the model gave no
	// timeout.
	ForegroundTimeout = 120 * time.Second
	// MaxTimeout is the largest timeout the model may ask for.
	MaxTimeout = time.Hour
	// MaxOutputWait bounds one process_output wait, so a tool call never
	// hangs the conversation.
	MaxOutputWait = 30 * time.Second
	// DefaultWait and MaxWait are process_wait's timeout when the model
	// gives none and the most it may ask for; progress notifications keep
	// the caller informed meanwhile.
	DefaultWait = 60 * time.Second
	MaxWait     = 10 * time.Minute
	// SignalWait is how long process_signal waits for the process to exit.
	SignalWait = 5 * time.Second
	// DefaultMaxOutput stops a command whose output passes it: a loop
	// printing forever would otherwise run until its timeout, or forever in
	// the background.
	DefaultMaxOutput = 64 << 20
)

// Options are the settings a Toolbox runs with. The zero value is the
// defaults.
type Options struct {
	// HeadBytes and TailBytes are how much of long output the Manager keeps
	// at the start and the end (agentproc.WithOutputLimits); they are only
	// stated in the descriptions, so pass what the Manager was given.
	// 0 means agentproc.DefaultHeadBytes and DefaultTailBytes.
	HeadBytes, TailBytes int
	// MaxOutput stops a command once its output passes that many bytes.
	// 0 means DefaultMaxOutput; negative means no limit.
	MaxOutput int64
	// Sandbox confines every command (agentproc.Request.Sandbox), and
	// execute's description tells the model what it may reach, so that it
	// reads a denied access as the policy rather than a bug to work around.
	// A workdir the model names must then lie inside Sandbox.Write. nil
	// means the Manager's default (Scope.DefaultSandbox), which the
	// descriptions do not state; a workdir must then lie inside its Write.
	Sandbox *agentproc.Sandbox
}

// withDefaults fills in the zero fields.
func (o Options) withDefaults() Options {
	if o.HeadBytes <= 0 {
		o.HeadBytes = agentproc.DefaultHeadBytes
	}
	if o.TailBytes <= 0 {
		o.TailBytes = agentproc.DefaultTailBytes
	}
	if o.MaxOutput == 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	return o
}

// Tools returns the definitions of the tools Dispatch serves, with the
// default Options; Toolbox.Tools states the Toolbox's own.
func Tools() []Tool {
	return tools(Options{}.withDefaults())
}

// tools builds the definitions for o, which has its defaults filled in.
func tools(o Options) []Tool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	object := func(required []string, props map[string]any) map[string]any {
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	processID := str("The process_id returned by execute.")
	offset := map[string]any{
		"type": "integer", "minimum": 0,
		"description": "Byte offset to read from: the next of the previous result. Defaults to 0, all output retained.",
	}
	kept := "Long output keeps its first " + size(int64(o.HeadBytes)) + " and last " + size(int64(o.TailBytes)) +
		"; the middle is dropped and marked. "
	if o.HeadBytes == o.TailBytes {
		kept = "Long output keeps its first and last " + size(int64(o.HeadBytes)) + "; the middle is dropped and marked. "
	}
	flood := ""
	if o.MaxOutput > 0 {
		flood = "A command whose output passes " + size(o.MaxOutput) + " is stopped; "
	}
	return []Tool{
		{
			Name: "execute",
			Description: "Run a shell command with sh -c and return its exit code and output (stdout and stderr together). " +
				"A foreground command is waited for until it exits or its timeout (default 120 seconds) stops it. " +
				"For anything that keeps running (dev servers, watchers, `tail -f`), set run_in_background: the call returns at once " +
				"with a process_id; then call process_wait to wait until it is ready (a port or a line), and process_signal to stop it. " +
				"Never end a command with `&` and never use nohup, setsid or disown: a job detached that way escapes supervision " +
				"and is killed when the command ends. Commands cannot prompt: there is no terminal, editors fail at once and pagers print " +
				"everything, so pass text as arguments (git commit -m, git merge --no-edit) and credentials through the environment or files; " +
				"for a program that must be answered, set stdin and answer with process_input. " +
				kept + flood + "when a command was stopped or killed, the result says why." + sandboxNote(o.Sandbox),
			InputSchema: object([]string{"command"}, map[string]any{
				"command": str("The command, exactly as you would type it in a shell. Do not append `&`."),
				"workdir": str("Directory to run in. Defaults to the project directory."),
				"timeout": map[string]any{
					"type": "integer", "minimum": 1, "maximum": int(MaxTimeout / time.Second),
					"description": "Seconds after which the command is stopped (terminate, then kill). " +
						"Omit it for the default: 120 for a foreground command; a background command runs until stopped unless you set it.",
				},
				"run_in_background": map[string]any{
					"type": "boolean",
					"description": "Return immediately with the process_id instead of waiting for the command to finish. " +
						"Use it for servers and other commands that do not exit by themselves.",
				},
				"stdin": map[string]any{
					"type": "boolean",
					"description": "Give the command a standard input that you write with process_input, for a program that asks " +
						"questions. Implies run_in_background. Without it, stdin is empty and a program that reads it sees end of input.",
				},
			}),
		},
		{
			Name: "process_output",
			Description: "Read the output of a process started by execute. The result holds the output from offset on and next, " +
				"the offset to pass the next time to get only output written since: pass back next instead of rereading everything. " +
				"Optionally wait first, at most 30 seconds: wait until the process exits, or until an output line matches pattern, a " +
				"regular expression, such as the line a server prints when it is ready to accept requests. " +
				"A wait ends at once when the process waits for input; pattern also matches the unfinished prompt line then.",
			ReadOnly: true,
			InputSchema: object([]string{"process_id"}, map[string]any{
				"process_id": processID,
				"offset":     offset,
				"wait": map[string]any{
					"type":        "boolean",
					"description": "Wait until the process exits (at most 30 seconds) before reading.",
				},
				"pattern": str("A regular expression (RE2 syntax), as process_wait's; wait until a line of output matches it (at most 30 seconds) " +
					"before reading. Use it for readiness, for example \"listening on|ready\"."),
			}),
		},
		{
			Name: "process_wait",
			Description: "Wait until a process started by execute is ready or done, instead of sleeping: until its process tree " +
				"listens on port (0 for any port), until an output line matches pattern, or, with neither, until it exits. " +
				"It returns as soon as that happens, when the process exits, when it waits for input (pattern also matches the " +
				"unfinished prompt line then), or after timeout seconds (default 60, at most 600), " +
				"with the output from offset on and next, like process_output. Use it after starting a server in the background.",
			ReadOnly: true,
			InputSchema: object([]string{"process_id"}, map[string]any{
				"process_id": processID,
				"port": map[string]any{
					"type": "integer", "minimum": 0, "maximum": 65535,
					"description": "Wait until the process or a child listens on this TCP or UDP port; 0 means any port.",
				},
				"pattern": str("A regular expression (RE2 syntax); wait until a line of output matches it, " +
					"for example \"listening on|ready\"."),
				"offset": offset,
				"timeout": map[string]any{
					"type": "integer", "minimum": 1, "maximum": int(MaxWait / time.Second),
					"description": "Seconds to wait at most. Omit it for the default, 60.",
				},
			}),
		},
		{
			Name: "process_input",
			Description: "Write text to the standard input of a process started by execute with stdin, such as the answer to a " +
				"prompt. End the text with \\n to press Enter. Then call process_output or process_wait with pattern to read " +
				"what the program answers. Set close to signal end of input (like Ctrl-D) after the text.",
			InputSchema: object([]string{"process_id"}, map[string]any{
				"process_id": processID,
				"text":       str("The text to write, exactly; include \\n to end a line."),
				"close": map[string]any{
					"type":        "boolean",
					"description": "Close the process's standard input after writing text, so it reads end of input.",
				},
			}),
		},
		{
			Name:        "process_list",
			Description: "List the processes started with execute: running ones first, then the newest. Each has its process_id, command, and state: running, or how it ended.",
			ReadOnly:    true,
			InputSchema: object(nil, map[string]any{}),
		},
		{
			Name: "process_signal",
			Description: "Send a signal to a process and everything it started, then wait up to 5 seconds for it to exit and report its state. " +
				"Use terminate to stop a server cleanly, kill if it does not stop, interrupt for Ctrl-C.",
			InputSchema: object([]string{"process_id", "signal"}, map[string]any{
				"process_id": processID,
				"signal": map[string]any{
					"type": "string", "enum": []string{"terminate", "kill", "interrupt"},
					"description": "terminate (SIGTERM), kill (SIGKILL) or interrupt (SIGINT, Ctrl-C).",
				},
			}),
		},
	}
}

// size writes n bytes in MiB, or KiB below one MiB, or bytes below one KiB.
func size(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%g KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%g MiB", float64(n)/(1<<20))
}

// sandboxNote tells the model what a sandboxed command may reach; "" for
// none.
func sandboxNote(sb *agentproc.Sandbox) string {
	if sb == nil {
		return ""
	}
	where := append([]string(nil), sb.Write...)
	if !sb.NoDefaultWrite {
		where = append(where, "the work dir", "$TMPDIR")
	}
	s := " Commands run in a sandbox: they can write only in " + strings.Join(where, ", ")
	if len(sb.Hide) > 0 {
		s += ", cannot read credentials (~/.ssh, ~/.aws and the like)"
	}
	switch sb.Network {
	case "", agentproc.NetworkNone:
		s += ", have no network access"
	case agentproc.NetworkLoopback:
		s += ", reach only a private localhost shared with your other commands"
	case agentproc.NetworkPorts:
		ports := make([]string, len(sb.AllowPorts))
		for i, p := range sb.AllowPorts {
			ports[i] = strconv.Itoa(p)
		}
		s += ", can open TCP connections only to port " + strings.Join(ports, ", ")
	case agentproc.NetworkHosts:
		s += ", reach only these hosts, through a proxy set in HTTPS_PROXY and HTTP_PROXY: " + strings.Join(sb.AllowHosts, ", ") +
			" (a result's blocked: section lists what was refused)"
	}
	return s + ", and do not see secret environment variables. An access the sandbox denies fails with " +
		"Permission denied or Operation not permitted: say so instead of trying to get around it."
}
