package llmtool

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
	"github.com/agentproc/agentproc/internal/pattern"
)

// Toolbox dispatches tool calls to the processes of one owner, such as one
// conversation: a model sees only what it started. Use New; a Toolbox is
// safe for concurrent calls.
type Toolbox struct {
	procs *agentproc.Scope
	opts  Options
}

// New returns a Toolbox acting in scope with opts.
func New(scope *agentproc.Scope, opts Options) *Toolbox {
	return &Toolbox{procs: scope, opts: opts.withDefaults()}
}

// Tools returns the definitions of the tools Dispatch serves, their
// descriptions stating the Toolbox's Options.
func (tb *Toolbox) Tools() []Tool {
	return tools(tb.opts)
}

// Progress receives news while a tool call waits: how many bytes of output
// the process has written so far, which grows with every call, and its
// newest lines of output, rendered as plain text.
type Progress func(written int64, newest string)

// Dispatch runs the tool call name(args) and returns its result as plain
// text. An error is meant for the model too, as the text of a failed tool
// call: it says what was wrong with the call. ctx bounds every wait. While
// a call waits for a process (a foreground execute, process_output with a
// wait, process_wait), progress, if not nil, is called with the newest output
// at most once a second; it is never called after Dispatch returns.
func (tb *Toolbox) Dispatch(ctx context.Context, name string, args json.RawMessage, progress Progress) (string, error) {
	switch name {
	case "execute":
		return call(ctx, args, progress, tb.execute)
	case "process_output":
		return call(ctx, args, progress, tb.output)
	case "process_wait":
		return call(ctx, args, progress, tb.wait)
	case "process_input":
		return call(ctx, args, progress, tb.input)
	case "process_list":
		return call(ctx, args, progress, tb.list)
	case "process_signal":
		return call(ctx, args, progress, tb.signal)
	}
	return "", xerrors.Errorf("unknown tool %q", name)
}

// call decodes args strictly (a misspelt parameter is an error the model
// can fix, not something to ignore) and runs f.
func call[A any](ctx context.Context, args json.RawMessage, progress Progress, f func(context.Context, A, Progress) (string, error)) (string, error) {
	var a A
	if len(bytes.TrimSpace(args)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return "", xerrors.Errorf("invalid arguments: %v", err)
		}
	}
	if progress == nil {
		progress = func(int64, string) {}
	}
	return f(ctx, a, progress)
}

type executeArgs struct {
	Command         string `json:"command"`
	WorkDir         string `json:"workdir"`
	Timeout         *int   `json:"timeout"`
	RunInBackground bool   `json:"run_in_background"`
	Stdin           bool   `json:"stdin"`
}

func (tb *Toolbox) execute(ctx context.Context, a executeArgs, progress Progress) (string, error) {
	if strings.TrimSpace(a.Command) == "" {
		return "", xerrors.New("command is required")
	}
	timeout, err := seconds(a.Timeout, MaxTimeout)
	if err != nil {
		return "", err
	}
	background := a.RunInBackground || a.Stdin
	if timeout == 0 && !background {
		timeout = ForegroundTimeout
	}
	sb := tb.opts.Sandbox
	if sb == nil {
		// The Manager's default confines the command then, and under it
		// too the work dir is writable to its tree: a workdir the model
		// chose freely (~/.local/bin, ~/.config/systemd/user) was
		// written by a tree whose policy named only the workspace
		// (eleventh attack review, TestAttackToolWorkdirUnderDefaultSandbox).
		sb = tb.procs.DefaultSandbox()
	}
	if sb != nil && a.WorkDir != "" && !sb.NoDefaultWrite && !sb.InWrite(a.WorkDir) {
		return "", xerrors.Errorf("workdir %q is outside the sandbox: use one of %s", a.WorkDir, strings.Join(sb.Write, ", "))
	}
	// Narrowed to itself, the policy has Start check the work dir again
	// where it grants it: a directory swapped for a link after the check
	// above is refused, not followed.
	sb, err = sb.Narrow(nil)
	if err != nil {
		return "", xerrors.Errorf("could not start the command: %v", err)
	}
	req := agentproc.Request{
		Command:    a.Command,
		WorkDir:    a.WorkDir,
		Background: background,
		Timeout:    timeout,
		Stdin:      a.Stdin,
		Sandbox:    sb,
	}
	if tb.opts.MaxOutput > 0 {
		req.MaxOutput = tb.opts.MaxOutput
	}
	p, err := tb.procs.Start(ctx, req)
	if errors.Is(err, agentproc.ErrTooManyProcesses) {
		return "", xerrors.Errorf("could not start the command: too many processes are running (%v). "+
			"Stop one you no longer need with process_signal (process_list shows them), or wait for one to exit, then start again", err)
	}
	if err != nil {
		return "", xerrors.Errorf("could not start the command: %v", err)
	}
	info := p.Info()
	var r result
	r.field("process_id", p.ID())
	if info.Command != a.Command {
		r.field("command", info.Command)
	}
	for _, w := range info.Warnings {
		r.field("warning", w)
	}
	if info.Background {
		// Either asked for, or the library found a trailing & and ran
		// the command supervised in the background instead.
		r.field("state", state(info))
		note := "Call process_wait to wait until it is ready (a port or a line of output), process_output to read its output, " +
			"and process_signal to stop it."
		if a.Stdin {
			note = "Answer its prompts with process_input. " + note
		}
		if !background {
			note = "The trailing & was removed and the command runs in the background, supervised. " + note +
				" Next time, use run_in_background instead of &."
		}
		r.field("note", note)
		return r.String(), nil
	}
	stop := follow(ctx, p, 0, progress)
	info, err = p.Wait(ctx)
	stop()
	if err != nil {
		r.field("state", "running")
		r.field("note", "Stopped waiting: "+err.Error()+". The command is still running; use process_output to follow it.")
		return r.String(), nil
	}
	r.field("state", state(info))
	text, next, omitted, err := readFrom(p, 0)
	if err != nil {
		return "", err
	}
	r.output(text, next, omitted)
	r.blocked(info.Denials)
	return r.String(), nil
}

type outputArgs struct {
	ProcessID string `json:"process_id"`
	Offset    int64  `json:"offset"`
	Wait      bool   `json:"wait"`
	Pattern   string `json:"pattern"`
	// WaitFor is pattern's earlier name, still accepted.
	WaitFor string `json:"wait_for"`
}

func (tb *Toolbox) output(ctx context.Context, a outputArgs, progress Progress) (string, error) {
	if a.Pattern == "" {
		a.Pattern = a.WaitFor
	} else if a.WaitFor != "" && a.WaitFor != a.Pattern {
		return "", xerrors.New("give pattern only (wait_for is its earlier name)")
	}
	re, err := compile("pattern", a.Pattern)
	if err != nil {
		return "", err
	}
	if a.Offset < 0 {
		return "", xerrors.New("offset must not be negative")
	}
	p, err := tb.process(a.ProcessID)
	if err != nil {
		return "", err
	}
	var r result
	r.field("process_id", p.ID())
	waitCtx, cancel := context.WithTimeout(ctx, MaxOutputWait)
	defer cancel()
	var matched, note string
	switch {
	case re != nil:
		stop := follow(waitCtx, p, a.Offset, progress)
		promptCtx, endWatch := endAtPrompt(waitCtx, p, a.Offset)
		line, err := p.WaitMatch(promptCtx, re, agentproc.Plain)
		prompted := atPrompt(promptCtx)
		endWatch()
		stop()
		switch {
		case err == nil:
			matched = line
		case errors.Is(err, agentproc.ErrExited):
			note = "The process exited without printing a line that matches pattern."
		case prompted:
			if matched = promptMatch(p, a.Offset, re); matched == "" {
				note = promptNote
			}
		case waitCtx.Err() != nil && ctx.Err() == nil:
			note = "No line matched pattern within 30 seconds; the process is still running."
		default:
			return "", err
		}
	case a.Wait:
		stop := follow(waitCtx, p, a.Offset, progress)
		promptCtx, endWatch := endAtPrompt(waitCtx, p, a.Offset)
		_, err := p.Wait(promptCtx)
		prompted := atPrompt(promptCtx)
		endWatch()
		stop()
		switch {
		case err == nil:
		case prompted:
			note = promptNote
		case ctx.Err() != nil:
			return "", err
		default:
			note = "The process did not exit within 30 seconds; it is still running."
		}
	}
	if err := tb.report(&r, p, a.Offset, matched, note); err != nil {
		return "", err
	}
	return r.String(), nil
}

// seconds returns a timeout argument as a Duration, 0 when it is absent. The
// range is checked on the integer, before it is multiplied: 18446744074
// seconds overflow a Duration and would wrap to 290 ms.
func seconds(n *int, most time.Duration) (time.Duration, error) {
	if n == nil {
		return 0, nil
	}
	if max := int(most / time.Second); *n < 1 || *n > max {
		return 0, xerrors.Errorf("timeout must be between 1 and %d seconds (omit it for the default)", max)
	}
	return time.Duration(*n) * time.Second, nil
}

type waitArgs struct {
	ProcessID string `json:"process_id"`
	Port      *int   `json:"port"`
	Pattern   string `json:"pattern"`
	Offset    int64  `json:"offset"`
	Timeout   *int   `json:"timeout"`
}

func (tb *Toolbox) wait(ctx context.Context, a waitArgs, progress Progress) (string, error) {
	re, err := compile("pattern", a.Pattern)
	if err != nil {
		return "", err
	}
	if a.Port != nil && (*a.Port < 0 || *a.Port > 65535) {
		return "", xerrors.New("port must be between 0 (any port) and 65535")
	}
	if a.Port != nil && re != nil {
		return "", xerrors.New("give port or pattern, not both: wait for one, then the other")
	}
	timeout, err := seconds(a.Timeout, MaxWait)
	if err != nil {
		return "", err
	}
	if timeout == 0 {
		timeout = DefaultWait
	}
	if a.Offset < 0 {
		return "", xerrors.New("offset must not be negative")
	}
	p, err := tb.process(a.ProcessID)
	if err != nil {
		return "", err
	}
	var r result
	r.field("process_id", p.ID())
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := follow(waitCtx, p, a.Offset, progress)
	promptCtx, endWatch := endAtPrompt(waitCtx, p, a.Offset)
	defer endWatch()
	var matched, note string
	timedOut := func() bool { return waitCtx.Err() != nil && ctx.Err() == nil }
	switch {
	case a.Port != nil:
		pt, err := p.WaitPort(promptCtx, *a.Port)
		switch {
		case err == nil:
			r.field("listening", fmt.Sprintf("%s %s port %d (pid %d)", pt.Network, pt.Addr, pt.Port, pt.PID))
		case errors.Is(err, agentproc.ErrExited):
			note = "The process exited before it listened on the port."
		case atPrompt(promptCtx):
			note = promptNote
		case timedOut():
			note = fmt.Sprintf("It did not listen on the port within %s; the process is still running. Read its output to see why.", timeout)
		case errors.Is(err, agentproc.ErrUnsupported):
			stop()
			return "", xerrors.New("waiting for a port is not supported on this system; wait for a pattern instead")
		default:
			stop()
			return "", err
		}
	case re != nil:
		line, err := p.WaitMatch(promptCtx, re, agentproc.Plain)
		switch {
		case err == nil:
			matched = line
		case errors.Is(err, agentproc.ErrExited):
			note = "The process exited without printing a line that matches pattern."
		case atPrompt(promptCtx):
			if matched = promptMatch(p, a.Offset, re); matched == "" {
				note = promptNote
			}
		case timedOut():
			note = fmt.Sprintf("No line matched pattern within %s; the process is still running.", timeout)
		default:
			stop()
			return "", err
		}
	default:
		if _, err := p.Wait(promptCtx); err != nil {
			switch {
			case atPrompt(promptCtx):
				note = promptNote
			case timedOut():
				note = fmt.Sprintf("The process did not exit within %s; it is still running.", timeout)
			default:
				stop()
				return "", err
			}
		}
	}
	stop()
	if err := tb.report(&r, p, a.Offset, matched, note); err != nil {
		return "", err
	}
	return r.String(), nil
}

// report adds a process's state, what a wait found, and its output from
// offset on to r.
func (tb *Toolbox) report(r *result, p *agentproc.Process, offset int64, matched, note string) error {
	// Read after the wait, so the output includes what the wait was for,
	// and after Info: a process reported exited has written everything,
	// so the read is then complete.
	info := p.Info()
	text, next, omitted, err := readFrom(p, offset)
	if err != nil {
		return err
	}
	if text == "" && offset > 0 {
		if end := outputEnd(p); offset > end {
			// Read from there, nothing would ever show: say so instead of
			// "no new output" forever.
			note = strings.TrimSpace(note + fmt.Sprintf(" offset %d is past the end of the output (%d bytes so far), so no output can show: "+
				"pass the next of your last read, or 0 to read from the start.", offset, end))
		}
	}
	r.field("state", state(info))
	r.field("matched", matched)
	r.field("note", note)
	r.output(text, next, omitted)
	r.blocked(info.Denials)
	return nil
}

type inputArgs struct {
	ProcessID string `json:"process_id"`
	Text      string `json:"text"`
	Close     bool   `json:"close"`
}

func (tb *Toolbox) input(ctx context.Context, a inputArgs, _ Progress) (string, error) {
	if a.Text == "" && !a.Close {
		return "", xerrors.New("give text to write, close, or both")
	}
	p, err := tb.process(a.ProcessID)
	if err != nil {
		return "", err
	}
	var r result
	r.field("process_id", p.ID())
	if a.Text != "" {
		n, err := p.WriteStdin(ctx, []byte(a.Text))
		if err != nil {
			return "", stdinError(err, n)
		}
		r.field("wrote", plural(int64(n), "byte"))
	}
	if a.Close {
		if err := p.CloseStdin(ctx); err != nil {
			return "", stdinError(err, 0)
		}
		r.field("stdin", "closed")
	}
	r.field("state", state(p.Info()))
	r.field("note", "Call process_output or process_wait with pattern and the offset you last read to see the answer.")
	return r.String(), nil
}

// stdinError says what a failed write to stdin means for the model.
func stdinError(err error, written int) error {
	switch {
	case errors.Is(err, agentproc.ErrNoStdin):
		return xerrors.New("the process has no stdin to write to: start it with execute and stdin set to true")
	case errors.Is(err, agentproc.ErrStdinClosed):
		return xerrors.Errorf("the process's stdin is closed (it exited, or it or you closed it); %s written", plural(int64(written), "byte"))
	}
	return xerrors.Errorf("writing to stdin failed after %s: %v", plural(int64(written), "byte"), err)
}

func (tb *Toolbox) list(context.Context, struct{}, Progress) (string, error) {
	infos := tb.procs.List()
	if len(infos) == 0 {
		return "No processes.\n", nil
	}
	var r result
	for i, info := range infos {
		if i > 0 {
			r.sb.WriteByte('\n')
		}
		r.field("process_id", info.ID)
		r.field("command", info.Command)
		r.field("state", state(info))
	}
	return r.String(), nil
}

type signalArgs struct {
	ProcessID string `json:"process_id"`
	Signal    string `json:"signal"`
}

func (tb *Toolbox) signal(ctx context.Context, a signalArgs, _ Progress) (string, error) {
	switch sig := agentproc.Signal(a.Signal); sig {
	case agentproc.SignalTerminate, agentproc.SignalKill, agentproc.SignalInterrupt:
	default:
		return "", xerrors.Errorf("signal must be terminate, kill or interrupt, not %q", a.Signal)
	}
	p, err := tb.process(a.ProcessID)
	if err != nil {
		return "", err
	}
	switch err := p.Signal(agentproc.Signal(a.Signal)); {
	case errors.Is(err, agentproc.ErrNotRunning):
		return "", xerrors.Errorf("the process has already exited: %s", state(p.Info()))
	case err != nil:
		return "", err
	}
	waitCtx, cancel := context.WithTimeout(ctx, SignalWait)
	defer cancel()
	info, err := p.Wait(waitCtx)
	var r result
	r.field("process_id", p.ID())
	r.field("state", state(info))
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		r.field("note", "The process is still running 5 seconds after the signal; send kill to end it.")
	}
	return r.String(), nil
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

// compile compiles an optional regular expression parameter. A pattern
// whose program is larger than pattern.MaxInsts is refused: the host
// matches it against output at a cost of the text's length times the
// program, in a match the call's timeout cannot stop (fourteenth attack
// review, TestAttackPatternCostsHostCPUThroughTool).
func compile(param, expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, xerrors.Errorf("%s is not a valid regular expression: %v", param, err)
	}
	if err := pattern.Check(re); err != nil {
		return nil, xerrors.Errorf("%s is %w", param, err)
	}
	return re, nil
}

// maxReads bounds how many chunks one result gathers: the retained output
// is at most two regions (head and tail), and a process writing fast must
// not keep a tool call reading forever.
const maxReads = 4

// outputEnd is the number of bytes p has written (its output's end
// offset), as far as the retained output tells.
func outputEnd(p *agentproc.Process) int64 {
	out := p.Output()
	if out.Truncated != nil {
		return out.Truncated.OriginalBytes
	}
	return int64(len(out.Text))
}

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
