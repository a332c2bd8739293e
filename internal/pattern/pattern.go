// Package pattern measures and bounds regular expressions that another
// hand wrote: a model's process_wait pattern (llmtool), an HTTP client's
// wait_for (httpapi). The host matches them against a tree's output, and
// Go's regexp, linear in the text, costs the text's length times the
// pattern's compiled program: each byte advances up to one thread per
// instruction, about 50 ns each on the review's machine. A 260 KB
// alternation (60,000 instructions, which regexp takes) made each KiB of
// a line cost the host 1.6 s of CPU, in a match no ctx interrupts
// (fourteenth attack review, TestAttackPatternCostsHostCPU).
package pattern

import (
	"fmt"
	"regexp"
	"regexp/syntax"
)

// MaxInsts bounds the program of a pattern Compile takes. A usual pattern
// compiles to under 100 instructions (`(?i)listening on (port )?\d+|ready
// in \d+ms|error`: 45); at the bound a byte of output costs the host about
// 50 µs.
const MaxInsts = 1000

// Size is the number of instructions re compiles to, at least 1. regexp
// keeps its program to itself, so the source is compiled again
// (microseconds for a usual pattern, 0.1 s for a 260 KB one). A source
// that only POSIX syntax takes is parsed so; one that neither takes
// (which regexp would not have compiled) counts as unbounded.
func Size(re *regexp.Regexp) int {
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		parsed, err = syntax.Parse(re.String(), syntax.POSIX)
	}
	if err != nil {
		return int(^uint(0) >> 1)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return int(^uint(0) >> 1)
	}
	return max(len(prog.Inst), 1)
}

// Check refuses a program larger than MaxInsts, with an error that says
// so and what to do; the caller names its parameter.
func Check(re *regexp.Regexp) error {
	if n := Size(re); n > MaxInsts {
		return fmt.Errorf("too large a regular expression: %d instructions once compiled, at most %d; "+
			"match a shorter part of the line", n, MaxInsts)
	}
	return nil
}
