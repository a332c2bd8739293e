//go:build unix

package agentproc_test

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

func TestTruncatedOutputCounts(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(1000, 1000, 0))
	// 20000 lines "line NNNNN\n" of 11 bytes each: 220 kB against 2 kB kept.
	// Few enough that the CPU-bound loop ends well inside the test deadline
	// on a loaded machine.
	p := mustStart(t, m, agentproc.Request{Command: `i=0; while [ $i -lt 20000 ]; do printf 'line %05d\n' $i; i=$((i+1)); done`})
	mustWait(t, p)
	out := p.Output()
	if out.Truncated == nil {
		t.Fatalf("Truncated got nil, want counts")
	}
	tr := out.Truncated
	if tr.OriginalBytes != 220000 || tr.RetainedBytes+tr.OmittedBytes != tr.OriginalBytes || tr.RetainedBytes > 2000 || tr.Strategy != "head_tail" {
		t.Errorf("Truncation got %+v, want 220000 original, at most 2000 retained, head_tail", tr)
	}
	if !strings.HasPrefix(out.Text, "line 00000\nline 00001\n") || !strings.HasSuffix(out.Text, "line 19998\nline 19999\n") {
		t.Errorf("text should keep head and tail; got %q...%q", out.Text[:30], out.Text[len(out.Text)-30:])
	}
	if !strings.Contains(out.Text, fmt.Sprintf("%d bytes omitted", tr.OmittedBytes)) {
		t.Errorf("text has no marker with %d omitted bytes", tr.OmittedBytes)
	}
}

// Output limits far beyond what a process writes cost what it writes: a
// 1<<50 tail must not panic the output reader, nor a 1<<30 one allocate
// 1 GiB per process once the head is full. Not parallel: it reads the
// heap's allocation total.
func TestOutputLimitsOutOfRange(t *testing.T) {
	const mib = 1 << 20
	// 1<<50 through an int64, so that the test builds where int is 32
	// bits (there MaxInt stands in for it).
	for _, tail := range []int{1 << 30, int(min(int64(1)<<50, int64(math.MaxInt)))} {
		m := newManager(t, agentproc.WithOutputLimits(4, tail, 0))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p := mustStart(t, m, agentproc.Request{Command: "head -c 1048576 /dev/zero | tr '\\0' x"})
		mustWait(t, p)
		out := p.Output()
		runtime.ReadMemStats(&after)
		if len(out.Text) != mib || out.Truncated != nil {
			t.Errorf("tail %d: got %d bytes (%+v), want the whole MiB", tail, len(out.Text), out.Truncated)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64*mib {
			t.Errorf("tail %d: allocated %d MiB for 1 MiB of output, want at most 64", tail, grew/mib)
		}
	}
}

func TestContiguousHeadTail(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(10, 10, 0))
	p := mustStart(t, m, agentproc.Request{Command: `printf '0123456789abcdefghij'`})
	mustWait(t, p)
	out := p.Output()
	if out.Text != "0123456789abcdefghij" || out.Truncated != nil {
		t.Errorf("got %q %+v, want the 20 bytes unchanged and no truncation", out.Text, out.Truncated)
	}
}

func TestSplitUTF8AtSeams(t *testing.T) {
	t.Parallel()
	// 3-byte runes with head and tail sizes that cut them at every offset.
	for head := 1; head <= 3; head++ {
		m := newManager(t, agentproc.WithOutputLimits(head*4+head%3, 7, 0))
		p := mustStart(t, m, agentproc.Request{Command: `i=0; while [ $i -lt 200 ]; do printf '€'; i=$((i+1)); done`})
		mustWait(t, p)
		text := p.Output().Text
		if strings.ContainsRune(text, '\uFFFD') {
			t.Errorf("head %d: text has U+FFFD: %q", head, text)
		}
	}
}
