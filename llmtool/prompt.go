package llmtool

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/agentproc/agentproc"
)

// errAwaitingInput is the cause a wait's context ends with when the process
// waits for input: nothing it waits for can come until the model answers,
// so waiting on would only run the wait to its timeout.
var errAwaitingInput = errors.New("llmtool: the process is waiting for input")

// promptNote is the note of a wait that ended at a prompt.
const promptNote = "Stopped waiting: the process is waiting for input (its prompt is the last line of output). " +
	"Answer with process_input, then wait again."

// endAtPrompt returns a context derived from ctx that ends, with
// errAwaitingInput as its cause, as soon as p awaits input
// (Info.AwaitingInput) with nothing after offset left to read. It wakes on
// p's output (WaitOutput returns at once, with Chunk.AwaitingInput, once
// the process waits for input), never on a timer. stop ends the watch and
// returns once it has ended.
func endAtPrompt(ctx context.Context, p *agentproc.Process, offset int64) (waitCtx context.Context, stop func()) {
	waitCtx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := p.WaitOutput(waitCtx, offset)
			if err != nil || c.EOF {
				return
			}
			if c.AwaitingInput {
				cancel(errAwaitingInput)
				return
			}
			offset = c.Next
		}
	}()
	return waitCtx, func() {
		cancel(nil)
		<-done
	}
}

// atPrompt reports whether the wait on waitCtx ended because the process
// waits for input.
func atPrompt(waitCtx context.Context) bool {
	return errors.Is(context.Cause(waitCtx), errAwaitingInput)
}

// maxPromptBytes bounds the unfinished line promptMatch matches: a prompt
// is short, and the match's cost is the line's length times the pattern's
// program (at most pattern.MaxInsts), so a line of the whole retained output would
// cost the host seconds (fourteenth attack review).
const maxPromptBytes = 4096

// promptMatch returns the last, unfinished line of p's output after offset,
// rendered as plain text, if re matches it: WaitMatch sees complete lines
// only, and a prompt ("Password: ", "Continue? [y/N] ") has no newline
// until it is answered.
func promptMatch(p *agentproc.Process, offset int64, re *regexp.Regexp) string {
	text, _, _, err := readFrom(p, offset)
	if err != nil || text == "" || strings.HasSuffix(text, "\n") {
		return ""
	}
	line := text[strings.LastIndexByte(text, '\n')+1:]
	if len(line) > maxPromptBytes {
		return "" // not a prompt; and its match would cost the host
	}
	line = agentproc.PlainText(line)
	if re.MatchString(line) {
		return line
	}
	return ""
}
