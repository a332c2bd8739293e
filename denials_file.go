package agentproc

import (
	"path/filepath"
	"slices"
	"strings"
)

// Inferred file denials: where the kernel does not report what Landlock
// or the mount namespace refused, the tree's own error messages ("cat:
// /home/u/.ssh/id_ed25519: Permission denied", "touch: cannot touch
// '/usr/x': Read-only file system", Python's "PermissionError: [Errno 13]
// Permission denied: '/etc/x'") name the path. Each absolute path on such
// a line is checked against the compiled policy, and only a path the
// policy does refuse is reported, as an Inferred Denial. What the output
// says is a diagnostic, never policy: nothing here changes what the tree
// may do.

// deniedMarkers are the errno texts of a refused access.
var deniedMarkers = []string{"Permission denied", "Read-only file system", "Operation not permitted"}

// maxInferredDenials bounds the denials read from one tree's output.
const maxInferredDenials = 16

// inferFileDenials scans p's final output for refused paths that r's
// policy explains and records them (Process.addDenial). It runs once, at
// the exit, before the exit is published.
func (r *sandboxRun) inferFileDenials(p *Process) {
	if r == nil || r.pol == nil {
		return
	}
	// Not plain: a copy, no rendering; the paths on an error line rarely
	// carry colour.
	text, _ := p.buf.renderText(p.m.cfg.maxLineBytes, false)
	if !slices.ContainsFunc(deniedMarkers, func(m string) bool { return strings.Contains(text, m) }) {
		return
	}
	seen := 0
	for line := range strings.SplitSeq(text, "\n") {
		if seen >= maxInferredDenials {
			return
		}
		if !slices.ContainsFunc(deniedMarkers, func(m string) bool { return strings.Contains(line, m) }) {
			continue
		}
		for _, path := range linePaths(line) {
			if d, ok := r.pol.explainFile(path, line); ok {
				p.addDenial(d)
				seen++
			}
		}
	}
}

// linePaths returns the absolute paths on a line: words starting with
// "/", less quotes and trailing punctuation.
func linePaths(line string) []string {
	var out []string
	for _, w := range strings.Fields(line) {
		w = strings.Trim(w, "'\"`‘’“”()[],;")
		w = strings.TrimSuffix(w, ":")
		w = strings.Trim(w, "'\"`‘’“”")
		if len(w) > 1 && w[0] == '/' && !strings.ContainsRune(w, 0) {
			out = append(out, filepath.Clean(w))
		}
	}
	return out
}

// explainFile says which rule of pol refuses path, given the message's
// line, or false when none does (the refusal is the file system's own).
func (pol *sandboxPolicy) explainFile(path, line string) (Denial, bool) {
	d := Denial{Kind: "file", Target: path, Inferred: true, Op: "read"}
	writing := strings.Contains(line, "Read-only file system") ||
		slices.ContainsFunc([]string{"create", "touch", "write", "mkdir", "remove", "rm:", "unlink", "rename", "chmod", "chown", "mv:", "cp:"},
			func(s string) bool { return strings.Contains(line, s) })
	in := func(list []string) bool {
		return slices.ContainsFunc(list, func(dir string) bool { return within(path, dir) })
	}
	switch {
	case in(pol.hide):
		d.Rule = "Hide"
	case writing && in(pol.readOnly):
		d.Op, d.Rule = "write", "ReadOnly"
	case writing && !in(pol.write):
		d.Op, d.Rule = "write", "outside Write"
	case pol.read != nil && !in(pol.read) && !in(pol.write):
		d.Rule = "outside Read"
	default:
		return Denial{}, false
	}
	return d, true
}
