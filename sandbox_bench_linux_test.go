package agentproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// BenchmarkSandbox runs Start+Wait of "true" without a sandbox and under
// WorkspaceSandbox, alternated round by round in one run as BenchmarkPaired
// does, with the mechanisms added one at a time in between so that each
// one's share is the difference of two medians: the throwaway thread with
// no_new_privs (and the private temp dir and the environment filter), then
// the mount namespace with the capabilities dropped (root), Landlock,
// seccomp, and the network namespace (root), which makes the full
// WorkspaceSandbox. sandbox-ratio is the full sandbox over none. Without
// root the namespace steps add nothing and Landlock carries the hidden
// paths itself.
func BenchmarkSandbox(b *testing.B) {
	if f := agentproc.SandboxSupport(); !f.Supported {
		b.Skipf("no sandbox here: %s", f)
	}
	ws := b.TempDir()
	sb := agentproc.WorkspaceSandbox(ws)
	steps := []struct {
		name string
		opts []agentproc.Option
	}{
		{"none", nil},
		{"thread", []agentproc.Option{agentproc.WithSandbox(sb), agentproc.WithSandboxOnly()}},
		{"mountns", []agentproc.Option{agentproc.WithSandbox(sb), agentproc.WithSandboxOnly("mountns", "capabilities")}},
		{"landlock", []agentproc.Option{agentproc.WithSandbox(sb), agentproc.WithSandboxOnly("mountns", "capabilities", "landlock")}},
		{"seccomp", []agentproc.Option{agentproc.WithSandbox(sb), agentproc.WithSandboxOnly("mountns", "capabilities", "landlock", "seccomp")}},
		{"netns", []agentproc.Option{agentproc.WithSandbox(sb)}},
	}
	ctx := context.Background()
	times := make([][]time.Duration, len(steps))
	managers := make([]*agentproc.Manager, len(steps))
	for i, s := range steps {
		managers[i] = agentproc.New(s.opts...)
		defer managers[i].Close()
	}
	run := func(i int) {
		start := time.Now()
		p, err := managers[i].Start(ctx, agentproc.Request{Command: "true", WorkDir: ws})
		if err != nil {
			b.Fatal(err)
		}
		if info, err := p.Wait(ctx); err != nil || info.ExitCode == nil || *info.ExitCode != 0 {
			b.Fatalf("%s: %v %+v", steps[i].name, err, info)
		}
		times[i] = append(times[i], time.Since(start))
	}
	for i := range steps {
		run(i) // builds each policy once, outside the measurement
		times[i] = nil
	}
	round := 0
	for b.Loop() {
		for i := range steps {
			run((round + i) % len(steps))
		}
		round++
	}
	med := make([]time.Duration, len(steps))
	for i, s := range steps {
		med[i] = medianDuration(times[i])
		b.ReportMetric(float64(med[i].Microseconds()), s.name+"-µs")
	}
	for i := 1; i < len(steps); i++ {
		b.ReportMetric(float64((med[i] - med[i-1]).Microseconds()), "+"+steps[i].name+"-µs")
	}
	b.ReportMetric(med[len(med)-1].Seconds()/med[0].Seconds(), "sandbox-ratio")
}
