package main

import (
	"bytes"
	"regexp"
	"testing"
)

// TestQuickstart runs the README's first command in-process and checks the
// parts of its output that do not vary from run to run.
func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, platformCommands()); err != nil {
		t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
	}
	for _, want := range []string{
		`server is ready: "server: listening"`,
		`build exited: code 0, reason exited`,
		`output: \d+ bytes written, 32768 kept, \d+ omitted \(head_tail\)`,
		`\[\.\.\. \d+ bytes omitted \.\.\.\]`,
		`compiling file_199999\.go`,
		`build ok`,
		`server stopped: reason killed`,
		`manager closed; nothing is left running`,
	} {
		if !regexp.MustCompile(want).Match(out.Bytes()) {
			t.Errorf("output does not match %q; got:\n%s", want, out.String())
		}
	}
}
