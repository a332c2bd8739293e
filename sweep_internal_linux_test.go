package agentproc

import (
	"fmt"
	"testing"
	"time"
)

// TestPIDsBetween: the PIDs a round probes after its pass are those
// handed out since the pass's mark, in the order the kernel hands them
// out, across a wrap at pid_max, and all of them once so long has passed
// that the range may have wrapped around more than once.
func TestPIDsBetween(t *testing.T) {
	t0 := time.Now()
	const window = 100 * time.Millisecond
	mark := func(last int, after time.Duration) pidMark { return pidMark{last: last, at: t0.Add(after)} }
	for _, tc := range []struct {
		name     string
		from, to pidMark
		want     string
	}{
		{"no mark", pidMark{}, mark(500, 0), "[]"},
		{"unknown now", mark(500, 0), pidMark{}, "[]"},
		{"none handed out", mark(500, 0), mark(500, time.Millisecond), "[]"},
		{"some", mark(500, 0), mark(510, time.Millisecond), "[{501 510}]"},
		{"many (no bound)", mark(500, 0), mark(30000, time.Millisecond), "[{501 30000}]"},
		{"wrapped once", mark(32000, 0), mark(400, time.Millisecond), "[{32001 32767} {1 400}]"},
		{"too long: every PID", mark(500, 0), mark(510, window), "[{501 32767} {1 500}]"},
		{"too long, none seen: every PID", mark(500, 0), mark(500, 2*window), "[{501 32767} {1 500}]"},
	} {
		got := fmt.Sprint(pidsBetween(tc.from, tc.to, window, 32768))
		if got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}
