package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc"
)

// Tool is one tool as a model API takes it: a name, a description that
// teaches the model when and how to use it, and a JSON Schema of its input.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

// Limits of the tools, stated in their descriptions too.
const (
	// foregroundTimeout stops a foreground command that the model gave no
	// timeout.
	foregroundTimeout = 120 * time.Second
	// maxTimeout is the largest timeout the model may ask for.
	maxTimeout = time.Hour
	// maxWait bounds one process_output wait, so a tool call never hangs
	// the conversation.
	maxWait = 30 * time.Second
	// signalWait is how long process_signal waits for the process to exit.
	signalWait = 5 * time.Second
)

// Tools returns the definitions of the four tools Dispatch serves.
func Tools() []Tool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	object := func(required []string, props map[string]any) map[string]any {
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	processID := str("The process_id returned by execute.")
	return []Tool{
		{
			Name: "execute",
			Description: "Run a shell command with sh -c and return its exit code and output (stdout and stderr together). " +
				"A foreground command is waited for until it exits or its timeout (default 120 seconds) stops it. " +
				"For anything that keeps running (dev servers, watchers, `tail -f`), set run_in_background: the call returns at once " +
				"with a process_id; then call process_output with wait_for to wait until it is ready, and process_signal to stop it. " +
				"Never end a command with `&` and never use nohup, setsid or disown: a job detached that way escapes supervision " +
				"and is killed when the command ends. Commands cannot prompt: there is no terminal, editors fail at once and pagers print " +
				"everything, so pass text as arguments (git commit -m, git merge --no-edit) and credentials through the environment or files. " +
				"Long output keeps its first and last 16 KiB; the middle is dropped and marked. " +
				"A command whose output passes 64 MiB is stopped; when a command was stopped or killed, ended says why.",
			InputSchema: object([]string{"command"}, map[string]any{
				"command": str("The command, exactly as you would type it in a shell. Do not append `&`."),
				"workdir": str("Directory to run in. Defaults to the project directory."),
				"timeout": map[string]any{
					"type": "integer", "minimum": 1, "maximum": int(maxTimeout / time.Second),
					"description": "Seconds after which the command is stopped (terminate, then kill). " +
						"Defaults to 120 for a foreground command; a background command runs until stopped unless you set it.",
				},
				"run_in_background": map[string]any{
					"type": "boolean",
					"description": "Return immediately with the process_id instead of waiting for the command to finish. " +
						"Use it for servers and other commands that do not exit by themselves.",
				},
			}),
		},
		{
			Name: "process_output",
			Description: "Read the output of a process started by execute. The result holds the output from offset on and next, " +
				"the offset to pass the next time to get only output written since: pass back next instead of rereading everything. " +
				"Optionally wait first, at most 30 seconds: wait until the process exits, or wait_for until an output line matches a " +
				"regular expression, such as the line a server prints when it is ready to accept requests.",
			InputSchema: object([]string{"process_id"}, map[string]any{
				"process_id": processID,
				"offset": map[string]any{
					"type": "integer", "minimum": 0,
					"description": "Byte offset to read from: the next of the previous result. Defaults to 0, all output retained.",
				},
				"wait": map[string]any{
					"type":        "boolean",
					"description": "Wait until the process exits (at most 30 seconds) before reading.",
				},
				"wait_for": str("A regular expression (RE2 syntax); wait until a line of output matches it (at most 30 seconds) " +
					"before reading. Use it for readiness, for example \"listening on|ready\"."),
			}),
		},
		{
			Name:        "process_list",
			Description: "List the processes started with execute: running ones first, then the newest. Each has its process_id, command, and exit code once it has exited.",
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

// Toolbox dispatches tool calls to the processes of one owner, such as one
// conversation: a model sees only what it started.
type Toolbox struct {
	procs *agentproc.Scope
}

// NewToolbox returns a Toolbox acting in scope.
func NewToolbox(scope *agentproc.Scope) *Toolbox {
	return &Toolbox{procs: scope}
}

// Dispatch runs the tool call name(args) and returns its JSON result. An error
// is meant for the model, as the text of a failed tool call: it says what was
// wrong with the call. ctx bounds every wait.
func (tb *Toolbox) Dispatch(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	switch name {
	case "execute":
		return call(ctx, args, tb.execute)
	case "process_output":
		return call(ctx, args, tb.output)
	case "process_list":
		return call(ctx, args, tb.list)
	case "process_signal":
		return call(ctx, args, tb.signal)
	}
	return nil, xerrors.Errorf("unknown tool %q", name)
}

// call decodes args strictly (a misspelt parameter is an error the model
// can fix, not something to ignore), runs f and encodes its result.
func call[A, R any](ctx context.Context, args json.RawMessage, f func(context.Context, A) (R, error)) (json.RawMessage, error) {
	var a A
	if len(bytes.TrimSpace(args)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return nil, xerrors.Errorf("invalid arguments: %v", err)
		}
	}
	r, err := f(ctx, a)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Commands and output are shell text: keep "<", ">" and "&" readable.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

type executeArgs struct {
	Command         string `json:"command"`
	WorkDir         string `json:"workdir"`
	Timeout         int    `json:"timeout"`
	RunInBackground bool   `json:"run_in_background"`
}

type executeResult struct {
	ProcessID  string   `json:"process_id"`
	Background bool     `json:"background,omitempty"`
	Command    string   `json:"command,omitempty"` // only when it is not what was asked
	Running    bool     `json:"running"`
	ExitCode   *int     `json:"exit_code,omitempty"`
	Reason     string   `json:"reason,omitempty"` // only when not a plain exit
	Ended      string   `json:"ended,omitempty"`  // why, in words, where the reason needs it
	Output     string   `json:"output,omitempty"`
	Next       *int64   `json:"next,omitempty"`
	Omitted    int64    `json:"omitted_bytes,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
	Note       string   `json:"note,omitempty"`
}

func (tb *Toolbox) execute(ctx context.Context, a executeArgs) (executeResult, error) {
	if strings.TrimSpace(a.Command) == "" {
		return executeResult{}, xerrors.New("command is required")
	}
	timeout := time.Duration(a.Timeout) * time.Second
	if a.Timeout < 0 || timeout > maxTimeout {
		return executeResult{}, xerrors.Errorf("timeout must be between 1 and %d seconds", int(maxTimeout/time.Second))
	}
	if timeout == 0 && !a.RunInBackground {
		timeout = foregroundTimeout
	}
	p, err := tb.procs.Start(ctx, agentproc.Request{
		Command:    a.Command,
		WorkDir:    a.WorkDir,
		Background: a.RunInBackground,
		Timeout:    timeout,
		MaxOutput:  maxOutput,
	})
	if err != nil {
		return executeResult{}, xerrors.Errorf("could not start the command: %v", err)
	}
	info := p.Info()
	res := executeResult{ProcessID: p.ID(), Warnings: info.Warnings}
	if info.Command != a.Command {
		res.Command = info.Command
	}
	if info.Background {
		// Either asked for, or the library found a trailing & and ran
		// the command supervised in the background instead.
		res.Background, res.Running = true, true
		res.Note = "Running in the background. Call process_output with wait_for to wait until it is ready, and process_signal to stop it."
		if !a.RunInBackground {
			res.Note = "The trailing & was removed and the command runs in the background, supervised. " + res.Note +
				" Next time, use run_in_background instead of &."
		}
		return res, nil
	}
	info, err = p.Wait(ctx)
	if err != nil {
		res.Running = true
		res.Note = "Stopped waiting: " + err.Error() + ". The command is still running; use process_output to follow it."
		return res, nil
	}
	res.ExitCode = info.ExitCode
	if info.Reason != agentproc.ReasonExited {
		res.Reason = string(info.Reason)
	}
	res.Ended = ended(info)
	text, next, omitted, err := readFrom(p, 0)
	if err != nil {
		return executeResult{}, err
	}
	res.Output, res.Next, res.Omitted = text, &next, omitted
	return res, nil
}

type outputArgs struct {
	ProcessID string `json:"process_id"`
	Offset    int64  `json:"offset"`
	Wait      bool   `json:"wait"`
	WaitFor   string `json:"wait_for"`
}

type outputResult struct {
	ProcessID string `json:"process_id"`
	Running   bool   `json:"running"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Ended     string `json:"ended,omitempty"`
	Matched   string `json:"matched,omitempty"`
	Output    string `json:"output"`
	Next      int64  `json:"next"`
	Omitted   int64  `json:"omitted_bytes,omitempty"`
	Note      string `json:"note,omitempty"`
}

func (tb *Toolbox) output(ctx context.Context, a outputArgs) (outputResult, error) {
	var re *regexp.Regexp
	if a.WaitFor != "" {
		var err error
		if re, err = regexp.Compile(a.WaitFor); err != nil {
			return outputResult{}, xerrors.Errorf("wait_for is not a valid regular expression: %v", err)
		}
	}
	if a.Offset < 0 {
		return outputResult{}, xerrors.New("offset must not be negative")
	}
	p, err := tb.process(a.ProcessID)
	if err != nil {
		return outputResult{}, err
	}

	res := outputResult{ProcessID: p.ID()}
	waitCtx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	switch {
	case re != nil:
		line, err := p.WaitMatch(waitCtx, re, agentproc.Plain)
		switch {
		case err == nil:
			res.Matched = line
		case errors.Is(err, agentproc.ErrExited):
			res.Note = "The process exited without printing a line that matches wait_for."
		case waitCtx.Err() != nil && ctx.Err() == nil:
			res.Note = "No line matched wait_for within 30 seconds; the process is still running."
		default:
			return outputResult{}, err
		}
	case a.Wait:
		if _, err := p.Wait(waitCtx); err != nil {
			if ctx.Err() != nil {
				return outputResult{}, err
			}
			res.Note = "The process did not exit within 30 seconds; it is still running."
		}
	}
	// Read after the wait, so the output includes what the wait was for,
	// and after Info: a process reported exited has written everything,
	// so the read is then complete.
	info := p.Info()
	text, next, omitted, err := readFrom(p, a.Offset)
	if err != nil {
		return outputResult{}, err
	}
	res.Running, res.ExitCode = info.Running, info.ExitCode
	if !info.Running && info.Reason != agentproc.ReasonExited {
		res.Reason = string(info.Reason)
	}
	res.Ended = ended(info)
	res.Output, res.Next, res.Omitted = text, next, omitted
	return res, nil
}

type listResult struct {
	Processes []listedProcess `json:"processes"`
}

type listedProcess struct {
	ProcessID  string `json:"process_id"`
	Command    string `json:"command"`
	Background bool   `json:"background,omitempty"`
	Running    bool   `json:"running"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Ended      string `json:"ended,omitempty"`
}

func (tb *Toolbox) list(context.Context, struct{}) (listResult, error) {
	res := listResult{Processes: []listedProcess{}}
	for _, info := range tb.procs.List() {
		lp := listedProcess{
			ProcessID:  info.ID,
			Command:    info.Command,
			Background: info.Background,
			Running:    info.Running,
			ExitCode:   info.ExitCode,
		}
		if !info.Running && info.Reason != agentproc.ReasonExited {
			lp.Reason = string(info.Reason)
		}
		lp.Ended = ended(info)
		res.Processes = append(res.Processes, lp)
	}
	return res, nil
}

type signalArgs struct {
	ProcessID string `json:"process_id"`
	Signal    string `json:"signal"`
}

type signalResult struct {
	ProcessID string `json:"process_id"`
	Running   bool   `json:"running"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Reason    string `json:"reason,omitempty"`
	EndedBy   string `json:"ended_by,omitempty"`
	Note      string `json:"note,omitempty"`
}

func (tb *Toolbox) signal(ctx context.Context, a signalArgs) (signalResult, error) {
	switch sig := agentproc.Signal(a.Signal); sig {
	case agentproc.SignalTerminate, agentproc.SignalKill, agentproc.SignalInterrupt:
	default:
		return signalResult{}, xerrors.Errorf("signal must be terminate, kill or interrupt, not %q", a.Signal)
	}
	p, err := tb.process(a.ProcessID)
	if err != nil {
		return signalResult{}, err
	}
	switch err := p.Signal(agentproc.Signal(a.Signal)); {
	case errors.Is(err, agentproc.ErrNotRunning):
		return signalResult{}, xerrors.New("the process has already exited")
	case err != nil:
		return signalResult{}, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, signalWait)
	defer cancel()
	info, err := p.Wait(waitCtx)
	res := signalResult{ProcessID: p.ID(), Running: info.Running, ExitCode: info.ExitCode}
	if err != nil {
		if ctx.Err() != nil {
			return signalResult{}, err
		}
		res.Note = "The process is still running 5 seconds after the signal; send kill to end it."
		return res, nil
	}
	res.Reason, res.EndedBy = string(info.Reason), info.ExitSignal
	return res, nil
}

// process finds the caller's process. Another owner's ID is reported exactly
// like an unknown one.
func (tb *Toolbox) process(id string) (*agentproc.Process, error) {
	if id == "" {
		return nil, xerrors.New("process_id is required")
	}
	p, err := tb.procs.Get(id)
	if err != nil {
		return nil, xerrors.Errorf("no process %q: it never existed or was dropped; call process_list", id)
	}
	return p, nil
}

// maxReads bounds how many chunks one result gathers: the retained output
// is at most two regions (head and tail), and a process writing fast must
// not keep a tool call reading forever.
const maxReads = 4

// readFrom reads p's output from offset up to what has been written by now,
// marking where retained output skips bytes, and returns the text, the
// offset to continue from, and how many bytes were skipped.
func readFrom(p *agentproc.Process, offset int64) (text string, next, omitted int64, err error) {
	var sb strings.Builder
	next = offset
	for range maxReads {
		c, err := p.Read(next)
		if err != nil {
			return "", 0, 0, err
		}
		if c.Omitted > 0 {
			if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
				sb.WriteByte('\n')
			}
			fmt.Fprintf(&sb, "[... %d bytes omitted ...]\n", c.Omitted)
			omitted += c.Omitted
		}
		sb.WriteString(c.Data)
		next = c.Next
		if c.Data == "" || c.EOF {
			break
		}
	}
	// Models read text, not a terminal: colours and progress redraws are
	// rendered away. The whole read is rendered at once so that a line
	// redrawn across two reads shows only its last state.
	return agentproc.PlainText(sb.String()), next, omitted, nil
}
