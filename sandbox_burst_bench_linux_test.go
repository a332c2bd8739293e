package agentproc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// BenchmarkSandboxBurst starts n sandboxed "true"s at once and waits for
// them all, alternated round by round with the same burst without a
// sandbox, for n = 1, 10 and 100: the cost per Start must not grow with the
// burst (one built policy serves every Start, and the temp dirs one burst
// leaves serve the next, maxEmptyTempDirs). per-start-µs is the burst's
// time over n, median of the rounds; sandbox-ratio is that of the sandbox
// over none. On two CPUs a burst keeps both busy, so the sandbox's CPU
// counts in full there, where a lone Start hides part of it on the idle CPU.
func BenchmarkSandboxBurst(b *testing.B) {
	if f := agentproc.SandboxSupport(); !f.Supported {
		b.Skipf("no sandbox here: %s", f)
	}
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			ws := b.TempDir()
			managers := []*agentproc.Manager{
				agentproc.New(),
				agentproc.New(agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))),
			}
			for _, m := range managers {
				defer m.Close()
			}
			ctx := context.Background()
			burst := func(m *agentproc.Manager) time.Duration {
				start := time.Now()
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						p, err := m.Start(ctx, agentproc.Request{Command: "true", WorkDir: ws})
						if err != nil {
							b.Error(err)
							return
						}
						if info, err := p.Wait(ctx); err != nil || info.ExitCode == nil || *info.ExitCode != 0 {
							b.Errorf("%v %+v", err, info)
						}
					})
				}
				wg.Wait()
				return time.Since(start) / time.Duration(n)
			}
			for _, m := range managers {
				burst(m) // builds the policy and the spares, outside the measurement
			}
			times := make([][]time.Duration, 2)
			round := 0
			for b.Loop() {
				for i := range managers {
					j := (round + i) % 2
					times[j] = append(times[j], burst(managers[j]))
				}
				round++
			}
			none, sb := medianDuration(times[0]), medianDuration(times[1])
			b.ReportMetric(float64(none.Microseconds()), "none-per-start-µs")
			b.ReportMetric(float64(sb.Microseconds()), "sandbox-per-start-µs")
			b.ReportMetric(sb.Seconds()/none.Seconds(), "sandbox-ratio")
		})
	}
}
