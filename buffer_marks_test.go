package agentproc

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// TestOffsetAtNeverDropsLaterOutput writes at random intervals on a mock
// clock, long enough for the marks to be thinned several times, and checks
// offsetAt against the time of every write: all output written at or after
// t is after the offset, what comes before t is at most the output of
// the one mark t falls in, the documented granularity, and a quiet hour
// stays exact.
func TestOffsetAtNeverDropsLaterOutput(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	start := clk.Now()
	b := newOutputBuffer(1<<20, 1<<20)
	// (The buffer keeps only the head and the tail of the ~5 MB written;
	// the marks cover all of it.)
	b.clock = clk
	type write struct {
		off int64
		at  time.Time
	}
	var writes []write
	rng := rand.New(rand.NewPCG(1, 2))
	var off, afterQuiet int64
	var quiet time.Time
	for i := range 5000 {
		clk.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
		if i == 100 {
			// An hour without output, as a server between requests: the
			// marks keep it however many merges follow.
			quiet = clk.Now().Add(30 * time.Minute)
			clk.Advance(time.Hour)
			afterQuiet = off
		}
		n := 1 + rng.IntN(100)
		if i%7 == 3 {
			// Large: the next write is not timed.
			n = largeWrite + rng.IntN(1000)
		}
		writes = append(writes, write{off, clk.Now()})
		b.Write(make([]byte, n))
		off += int64(n)
	}
	if len(b.marks) > maxMarks {
		t.Fatalf("marks: got %d, want at most %d", len(b.marks), maxMarks)
	}
	end := clk.Now()
	for probe := start.Add(-time.Second); probe.Before(end.Add(2 * time.Second)); probe = probe.Add(777 * time.Millisecond) {
		got := b.offsetAt(probe)
		// The first write at or after probe must be at or after got.
		first := off
		for _, w := range writes {
			if !w.at.Before(probe) {
				first = w.off
				break
			}
		}
		if got > first {
			t.Fatalf("offsetAt(%v): got %d, want at most %d (the first write at or after it)", probe.Sub(start), got, first)
		}
		// What comes before probe is the output of one mark at most:
		// the mark at got was still being written at probe.
		if got > 0 && got < off {
			i := slices.IndexFunc(b.marks, func(m outputMark) bool { return m.off == got })
			if i < 0 {
				t.Fatalf("offsetAt(%v): got %d, which is no mark", probe.Sub(start), got)
			}
			if last := time.Unix(0, b.marks[i].last); last.Before(probe) {
				t.Fatalf("offsetAt(%v): got the mark at %d, whose output ended %v before it", probe.Sub(start), got, probe.Sub(last))
			}
			if i > 0 && !time.Unix(0, b.marks[i-1].last).Before(probe) {
				t.Fatalf("offsetAt(%v): got the mark at %d, but the one before it was written at or after it", probe.Sub(start), got)
			}
		}
	}
	if got := b.offsetAt(quiet); got != afterQuiet {
		t.Errorf("offsetAt in an hour without output: got %d, want %d, the first write after it", got, afterQuiet)
	}
	if got := b.offsetAt(end.Add(time.Second)); got != off {
		t.Errorf("offsetAt after the last write: got %d, want the end %d", got, off)
	}
	if got := b.offsetAt(start.Add(-time.Hour)); got != 0 {
		t.Errorf("offsetAt before the first write: got %d, want 0", got)
	}
}

// TestOffsetAtWithoutClock: a buffer without marks maps every time to 0.
func TestOffsetAtWithoutClock(t *testing.T) {
	t.Parallel()
	b := newOutputBuffer(16, 16)
	b.Write([]byte("hello"))
	if got := b.offsetAt(time.Now()); got != 0 {
		t.Errorf("offsetAt without marks: got %d, want 0", got)
	}
}
