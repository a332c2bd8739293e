package agentproc

import (
	"bytes"
	"io"
	"runtime"
	"testing"

	"github.com/coder/quartz"
)

// BenchmarkBufferWrite measures outputBuffer.Write in the steady state (head
// full, ring allocated) against io.Discard, the cheapest correct io.Writer a
// process's output could be copied to, so the ratio of the two is the cost
// of keeping the output (time marks for OffsetAt included).
func BenchmarkBufferWrite(b *testing.B) {
	sizes := []struct {
		name string
		n    int
	}{
		{"64B", 64},
		{"4KiB", 4 << 10},
		{"32KiB", 32 << 10},
	}
	writers := []struct {
		name string
		new  func() io.Writer
	}{
		{"agentproc", func() io.Writer {
			w := newOutputBuffer(16<<10, 16<<10)
			w.clock = quartz.NewReal()      // as Manager.newBuffer: with time marks
			w.Write(make([]byte, 16<<10+1)) // fill the head, allocate the ring
			return w
		}},
		{"discard", func() io.Writer { return io.Discard }},
	}
	for _, w := range writers {
		for _, size := range sizes {
			b.Run(w.name+"/"+size.name, func(b *testing.B) {
				dst := w.new()
				p := bytes.Repeat([]byte("output line\n"), size.n/12+1)[:size.n]
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b.ResetTimer()
				for b.Loop() {
					dst.Write(p)
				}
				b.StopTimer()
				runtime.ReadMemStats(&after)
				// Reported unrounded, unlike the built-in allocs/op, so a
				// rare allocation amortised over many writes still shows.
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/op")
			})
		}
	}
}
