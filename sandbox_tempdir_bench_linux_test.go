package agentproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// BenchmarkSandboxTempDir is the share of the private temp dir in a
// sandboxed Start+Wait of "true": WorkspaceSandbox with NoDefaultWrite
// (no temp dir) and as is, alternated Start by Start in one run so that
// both see the same load. Each tree reaches its own temp dir only: as
// root through a mount namespace of its own and a ruleset made for it,
// without root through a second Landlock layer (confine.PrivateTemp,
// sandboxBuilt.treeRulesets), both made on the ready thread ahead of the
// Start. +tmp-µs is the difference of the medians.
func BenchmarkSandboxTempDir(b *testing.B) {
	if f := agentproc.SandboxSupport(); !f.Supported {
		b.Skipf("no sandbox here: %s", f)
	}
	ws := b.TempDir()
	without := agentproc.WorkspaceSandbox(ws)
	without.NoDefaultWrite = true
	without.Write = append(without.Write, ws)
	ms := []*agentproc.Manager{agentproc.New(agentproc.WithSandbox(without)), agentproc.New(agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))}
	for _, m := range ms {
		defer m.Close()
	}
	ctx := context.Background()
	times := make([][]time.Duration, len(ms))
	run := func(i int) {
		start := time.Now()
		p, err := ms[i].Start(ctx, agentproc.Request{Command: "true", WorkDir: ws})
		if err != nil {
			b.Fatal(err)
		}
		if info, err := p.Wait(ctx); err != nil || info.ExitCode == nil || *info.ExitCode != 0 {
			b.Fatalf("%v %+v", err, info)
		}
		times[i] = append(times[i], time.Since(start))
	}
	for i := range ms {
		run(i) // builds each policy once, outside the measurement
		run(i) // and the next Start finds a ready thread
		times[i] = nil
	}
	for b.Loop() {
		// Two in a row each, as a caller running one kind of command does:
		// a ready thread serves a Start only after one of its policy.
		run(0)
		run(0)
		run(1)
		run(1)
	}
	notmp, tmp := medianDuration(times[0]), medianDuration(times[1])
	b.ReportMetric(float64(notmp.Microseconds()), "notmp-µs")
	b.ReportMetric(float64(tmp.Microseconds()), "tmp-µs")
	b.ReportMetric(float64((tmp - notmp).Microseconds()), "+tmp-µs")
}
