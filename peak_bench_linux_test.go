package agentproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// BenchmarkPeakRecords measures what the exit records cost a Start+Wait
// of true without a cgroup: one Manager that takes its peaks from them
// against one that does not (the ru_maxrss fallback), alternated in one
// loop, each round starting with the other; it reports the medians and
// their ratio. Both run while the process's listener is open (the first
// holds it), so what the reader spends on every exit is in both: that is
// BenchmarkExitStorm's (internal/taskstats).
func BenchmarkPeakRecords(b *testing.B) {
	ctx := context.Background()
	with, without := agentproc.New(), agentproc.New()
	defer with.Close()
	defer without.Close()
	agentproc.WithoutExitRecords(without)
	run := func(m *agentproc.Manager, into *[]time.Duration) {
		start := time.Now()
		p, err := m.Start(ctx, agentproc.Request{Command: "true"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	var on, off []time.Duration
	run(with, &on) // opens the listener outside the timed rounds
	on = on[:0]
	round := 0
	for b.Loop() {
		if round%2 == 0 {
			run(with, &on)
			run(without, &off)
		} else {
			run(without, &off)
			run(with, &on)
		}
		round++
	}
	w, wo := medianDuration(on), medianDuration(off)
	b.ReportMetric(float64(w.Microseconds()), "records-µs")
	b.ReportMetric(float64(wo.Microseconds()), "fallback-µs")
	b.ReportMetric(w.Seconds()/wo.Seconds(), "records-ratio")
}
