package pattern

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// alternation is n branches the parser can neither merge nor factor.
func alternation(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `[^\x{%x}]x|`, 0x4e00+i)
	}
	return b.String() + "y"
}

func TestSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr     string
		min, max int
	}{
		{`x`, 1, 5},
		{`(?i)listening on (port )?\d+|ready in \d+ms|error`, 30, 60},
		{`.{250}x`, 250, 260},
		{alternation(2000), 4000, 7000},
	} {
		if got := Size(regexp.MustCompile(tc.expr)); got < tc.min || got > tc.max {
			t.Errorf("Size(%.40q): got %d, want %d to %d", tc.expr, got, tc.min, tc.max)
		}
	}
	if got := Size(regexp.MustCompilePOSIX(`a|b`)); got < 1 || got > 10 {
		t.Errorf("Size of a POSIX pattern: got %d, want 1 to 10", got)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{`x`, `ready in \d+ms`, `.{990}x`} {
		if err := Check(regexp.MustCompile(expr)); err != nil {
			t.Errorf("Check(%q): got %v, want nil", expr, err)
		}
	}
	for _, expr := range []string{`.{1000}x`, alternation(2000)} {
		if err := Check(regexp.MustCompile(expr)); err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("Check(%.40q): got %v, want it refused as too large", expr, err)
		}
	}
}
