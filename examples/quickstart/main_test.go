package main

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"
)

// TestQuickstart runs the README's first command in-process and checks the
// parts of its output that do not vary from run to run.
func TestQuickstart(t *testing.T) {
	lines := buildLines
	if underWine() {
		// Wine's cmd.exe, with the console agentproc gives it, echoes
		// about 1,500 lines a second: 200,000 would overrun run's minute.
		lines = 20000
	}
	var out bytes.Buffer
	if err := run(&out, platformCommands(lines)); err != nil {
		t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
	}
	for _, want := range []string{
		`server is ready: "server: listening"`,
		`build exited: code 0, reason exited`,
		`output: \d+ bytes written, 32768 kept, \d+ omitted \(head_tail\)`,
		`\[\.\.\. \d+ bytes omitted \.\.\.\]`,
		fmt.Sprintf(`compiling file_%d\.go`, lines-1),
		`build ok`,
		`server stopped: reason killed`,
		`manager closed; nothing is left running`,
	} {
		if !regexp.MustCompile(want).Match(out.Bytes()) {
			t.Errorf("output does not match %q; got:\n%s", want, out.String())
		}
	}
}
