package agentproc_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// cpuTime returns this process's user plus system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWaitPort100 measures what 100 processes each with a WaitPort
// waiter (on a port they never open) cost this process, in percent of one
// core over a 2 s window once the poller has backed off; the baseline is
// the same 100 processes with nobody waiting.
func BenchmarkWaitPort100(b *testing.B) {
	const procs = 100
	const window = 2 * time.Second
	for _, mode := range []string{"agentproc", "idle"} {
		b.Run(mode, func(b *testing.B) {
			m := agentproc.New()
			defer m.Close()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range procs {
				p, err := m.Start(ctx, agentproc.Request{Command: "exec sleep 600"})
				if err != nil {
					b.Fatal(err)
				}
				if mode == "agentproc" {
					wg.Go(func() { _, _ = p.WaitPort(ctx, 1) })
				}
			}
			// Let the poller reach its longest interval before measuring:
			// the window is the steady cost, not the first second.
			time.Sleep(time.Second) // measuring a rate over time, not synchronising
			reportCoreShare(b, window)
			cancel()
			wg.Wait()
		})
	}
}

// BenchmarkInputWatch100 measures what input detection costs for 100
// quiet processes with a stdin pipe that never read it (the worst case:
// each is looked at in /proc, backing off to every 2 s), in percent of one
// core over a 2 s window; the baseline is the same processes without stdin.
func BenchmarkInputWatch100(b *testing.B) {
	const procs = 100
	const window = 2 * time.Second
	for _, mode := range []string{"agentproc", "idle"} {
		b.Run(mode, func(b *testing.B) {
			m := agentproc.New()
			defer m.Close()
			for range procs {
				if _, err := m.Start(b.Context(), agentproc.Request{Command: "exec sleep 600", Stdin: mode == "agentproc"}); err != nil {
					b.Fatal(err)
				}
			}
			// Past the quiet period and the first backoff steps: the
			// window measures the steady cost.
			time.Sleep(3 * time.Second) // measuring a rate over time, not synchronising
			reportCoreShare(b, window)
		})
	}
}

// reportCoreShare reports, as "%core", the share of one core this process
// used over b.N windows of the given length.
func reportCoreShare(b *testing.B, window time.Duration) {
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		before := cpuTime(b)
		time.Sleep(window) // the measurement window itself
		cpu += cpuTime(b) - before
	}
	b.StopTimer()
	b.ReportMetric(100*cpu.Seconds()/(window.Seconds()*float64(b.N)), "%core")
}
