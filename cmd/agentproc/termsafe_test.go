package main

import (
	"strings"
	"testing"
)

// hostile is output a command could print to take over a person's
// terminal, between colours that must survive.
const hostile = "\x1b[1;31mred\x1b[0m|\x1b]52;c;aGVsbG8=\x07|\x1b]0;title\x1b\\|\x1b[2J\x1b[H|\x1bc|\x1b[6n|\x1bP+q544e\x1b\\|\xc2\x9b31m|\x07\x0e|é\r\n\tend"

// TestTermFilter: colours, text, \r, \n and \t pass; OSC (clipboard,
// title), DCS, other CSI (clear, cursor, queries), ESC c, C1 controls and
// other C0 controls are dropped, however the output is split across
// writes.
func TestTermFilter(t *testing.T) {
	t.Parallel()
	const want = "\x1b[1;31mred\x1b[0m|||||||31m||é\r\n\tend"
	for cut := 0; cut <= len(hostile); cut++ {
		var sb strings.Builder
		f := &termFilter{w: &sb}
		f.Write([]byte(hostile[:cut]))
		f.Write([]byte(hostile[cut:]))
		if got := sb.String(); got != want {
			t.Fatalf("split at %d: got %q, want %q", cut, got, want)
		}
	}
}
