//go:build unix

package agentproc_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// redactBenchSecrets returns n secrets shaped like API tokens.
func redactBenchSecrets(n int) map[string]string {
	s := make(map[string]string, n)
	for i := range n {
		s[fmt.Sprintf("BENCH_TOKEN_%d", i)] = fmt.Sprintf("tok_%08x%08xQz%04dk9Xv", uint32(i)*2654435761, i*40503, i)
	}
	return s
}

// redactBenchLine is what the throughput child prints over and over: a
// log line of letters, digits and punctuation, so that the matcher's
// filter sees grams like those of real output (zero bytes would never
// reach it).
const redactBenchLine = "2026-11-27T01:23:45Z INFO request id=4f3c2a1b9e path=/api/v1/items?page=3 status=200 bytes=5123 dur=12ms user=alice"

// BenchmarkRedactPaired runs the same work with 50 registered secrets and
// with redaction off, alternately, and reports the median of each and
// their ratio, and the median host CPU time of each: Throughput, the
// child printing 1 GiB of log lines (64 MiB with -short); StartWait,
// `true`.
func BenchmarkRedactPaired(b *testing.B) {
	n := throughputBytes()
	big := "yes '" + redactBenchLine + "' | head -c " + strconv.FormatInt(n, 10)
	for _, tt := range []struct {
		name, command string
		bytes         int64
	}{
		{"Throughput", big, n},
		{"StartWait", "true", 0},
	} {
		b.Run(tt.name, func(b *testing.B) {
			with := agentproc.New(agentproc.WithSecrets(redactBenchSecrets(50)))
			defer with.Close()
			without := agentproc.New(agentproc.WithRedaction(false))
			defer without.Close()
			ctx := context.Background()
			times := map[*agentproc.Manager][]time.Duration{}
			cpus := map[*agentproc.Manager][]time.Duration{}
			run := func(m *agentproc.Manager) {
				cpu := processCPU()
				start := time.Now()
				p, err := m.Start(ctx, agentproc.Request{Command: tt.command})
				if err != nil {
					b.Fatal(err)
				}
				info, err := p.Wait(ctx)
				if err != nil || info.Redactions != 0 {
					b.Fatalf("Wait: %+v %v, want no redactions", info, err)
				}
				times[m] = append(times[m], time.Since(start))
				// The host's CPU (the children's is not counted): the
				// stage's cost, which the load of a shared machine
				// moves far less than the wall time.
				cpus[m] = append(cpus[m], processCPU()-cpu)
			}
			round := 0
			for b.Loop() {
				if round%2 == 0 {
					run(with)
					run(without)
				} else {
					run(without)
					run(with)
				}
				round++
			}
			w, o := medianDuration(times[with]), medianDuration(times[without])
			wc, oc := medianDuration(cpus[with]), medianDuration(cpus[without])
			b.ReportMetric(float64(wc.Microseconds()), "secrets-cpu-µs")
			b.ReportMetric(float64(oc.Microseconds()), "none-cpu-µs")
			if tt.bytes > 0 {
				b.ReportMetric(float64(tt.bytes)/w.Seconds()/1e6, "secrets-MB/s")
				b.ReportMetric(float64(tt.bytes)/o.Seconds()/1e6, "none-MB/s")
				b.ReportMetric(o.Seconds()/w.Seconds(), "throughput-ratio")
			} else {
				b.ReportMetric(float64(w.Microseconds()), "secrets-µs")
				b.ReportMetric(float64(o.Microseconds()), "none-µs")
				b.ReportMetric(w.Seconds()/o.Seconds(), "time-ratio")
			}
		})
	}
}
