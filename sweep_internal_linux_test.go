package agentproc

import (
	"fmt"
	"testing"
)

// TestPIDsBetween: the PIDs a round probes after its pass are those
// handed out since the pass's mark, in the order the kernel hands them
// out, without a bound on how many, across a wrap at pid_max.
func TestPIDsBetween(t *testing.T) {
	for _, tc := range []struct {
		name       string
		from, last int
		want       string
	}{
		{"no mark", 0, 500, "[]"},
		{"unknown now", 500, 0, "[]"},
		{"none handed out", 500, 500, "[]"},
		{"some", 500, 510, "[{501 510}]"},
		{"many (no bound)", 500, 30000, "[{501 30000}]"},
		{"wrapped once", 32000, 400, "[{32001 32767} {1 400}]"},
	} {
		got := fmt.Sprint(pidsBetween(tc.from, tc.last, 32768))
		if got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}
