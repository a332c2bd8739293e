package agentproc

import "github.com/agentproc/agentproc/internal/termtext"

// PlainText renders terminal output the way a terminal would show it, as
// plain text for a reader that is not a terminal (a log, a language model):
//
//   - escape sequences are removed: CSI (colours, cursor movement), OSC
//     (titles, hyperlinks; ended by BEL, ST or a newline), DCS, SOS, PM and
//     APC strings, two- and three-byte ESC sequences, and their 8-bit C1
//     forms;
//   - within each line, "\r" returns to the start of the line and later text
//     overwrites what was there, "\b" moves back one character, and the
//     erase-in-line (CSI K) and horizontal cursor sequences (CSI C, D, G)
//     act on the line, so a progress bar redrawn a thousand times shows its
//     last state once; "\r\n" ends a line like "\n";
//   - other control characters except "\t" and "\n" are removed;
//   - each run of invalid UTF-8 becomes U+FFFD, as in Chunk.Data.
//
// Cursor movement never goes past the end of the text already on the line,
// so the result is never longer than the input with invalid bytes replaced
// (for valid UTF-8: never longer than s). Sequences that move between lines
// (cursor up, scroll regions, full-screen programs) are removed without
// being acted on. The work of acting on the line is bounded by the input's
// length (four cursor steps a byte): past that, which no terminal program's
// output comes near, cursor and erase sequences are removed without being
// acted on and text is appended rather than overwriting runes of another
// width, so a render is linear in s whatever a process prints. PlainText
// returns s itself, without allocating, when there is nothing to change.
// It is safe for concurrent use.
func PlainText(s string) string {
	return termtext.Render(s)
}

// OutputOption changes how Process.Output and Process.WaitMatch present
// output. The zero set of options presents it as the process wrote it.
type OutputOption interface {
	applyOutput(*outputOptions)
}

type outputOptions struct {
	plain bool
}

type plainOption struct{}

func (plainOption) applyOutput(o *outputOptions) { o.plain = true }

// Plain presents output as terminal-clean text (see PlainText): Output.Text
// has the head and the tail each rendered before long lines are cut, and
// WaitMatch matches and returns rendered lines. Truncation still counts the
// raw bytes the process wrote, so its accounting stays exact. Rendering is
// per call; the retained output is never changed.
var Plain OutputOption = plainOption{}

func outputOptionsOf(opts []OutputOption) outputOptions {
	if len(opts) == 0 {
		// Without this, o escapes through the interface call below on
		// every Output, options or not: one allocation of Output's three.
		return outputOptions{}
	}
	o := new(outputOptions)
	for _, opt := range opts {
		if opt != nil {
			opt.applyOutput(o)
		}
	}
	return *o
}
