package agentproc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// BenchmarkLimits measures Start+Wait of true with Limits against the same
// without, alternated in one loop (see BenchmarkPaired) on one Manager, and
// reports the median of each and their ratio. On a hybrid or v1 host the
// limited start pays for the thread placement in the cgroups made ahead
// (one per hierarchy, plus the controller-less v2 one) and the v1 limits
// written after it; on v2 for CLONE_INTO_CGROUP; on both for the exit's
// reads of the cgroups' counters. Their removal follows the exit, off
// Wait's path, and competes with the next Start for the CPU. "all" sets memory,
// procs and CPU (on this project's machines: memory, pids and cpu v1
// hierarchies and a v2 cgroup); "procs" only the process limit.
func BenchmarkLimits(b *testing.B) {
	for _, tt := range []struct {
		name   string
		limits agentproc.Limits
	}{
		{"all", agentproc.Limits{Memory: 256 << 20, Procs: 64, CPU: 1}},
		{"procs", agentproc.Limits{Procs: 64}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			m := agentproc.New()
			defer m.Close()
			ctx := context.Background()
			if p, err := m.Start(ctx, agentproc.Request{Command: "true", Limits: tt.limits}); errors.Is(err, agentproc.ErrUnsupported) {
				b.Skipf("limits cannot be held here: %v", err)
			} else if err != nil {
				b.Fatal(err)
			} else if _, err := p.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			var limited, plain []time.Duration
			run := func(l agentproc.Limits, into *[]time.Duration) {
				start := time.Now()
				p, err := m.Start(ctx, agentproc.Request{Command: "true", Limits: l})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				*into = append(*into, time.Since(start))
			}
			round := 0
			for b.Loop() {
				// Each round starts with the other variant.
				if round%2 == 0 {
					run(tt.limits, &limited)
					run(agentproc.Limits{}, &plain)
				} else {
					run(agentproc.Limits{}, &plain)
					run(tt.limits, &limited)
				}
				round++
			}
			l, p := medianDuration(limited), medianDuration(plain)
			b.ReportMetric(float64(l.Microseconds()), "limits-µs")
			b.ReportMetric(float64(p.Microseconds()), "plain-µs")
			b.ReportMetric(l.Seconds()/p.Seconds(), "limits-ratio")
		})
	}
}
