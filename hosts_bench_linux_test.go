package agentproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// BenchmarkSandboxHosts runs Start+Wait of "true" under WorkspaceSandbox
// with NetworkNone and with NetworkHosts (a proxy listener made for the
// tree, its Landlock port layer and the hosts seccomp filter), alternated
// round by round in one run; hosts-ratio is the second's median over the
// first's. "shared": both from one Manager, whose Starts then take turns
// between two policies, each taking the ready thread made for its policy
// (until issue 38's fix they got none: every Start confined its own
// thread); "apart": each from a Manager of its own, as a Manager that
// starts trees of one policy does, each Start taking the ready thread
// confined ahead (with its listener, for NetworkHosts).
func BenchmarkSandboxHosts(b *testing.B) {
	b.Run("shared", func(b *testing.B) { benchSandboxHosts(b, false) })
	b.Run("apart", func(b *testing.B) { benchSandboxHosts(b, true) })
}

func benchSandboxHosts(b *testing.B, apart bool) {
	if !hasNetwork(agentproc.NetworkHosts) {
		b.Skipf("NetworkHosts is not enforced here: %s", agentproc.SandboxSupport())
	}
	ws := b.TempDir()
	none := agentproc.WorkspaceSandbox(ws)
	hosts := agentproc.WorkspaceSandbox(ws)
	hosts.Network, hosts.AllowHosts = agentproc.NetworkHosts, []string{"proxy.golang.org"}
	m := agentproc.New()
	defer m.Close()
	ms := []*agentproc.Manager{m, m}
	if apart {
		m2 := agentproc.New()
		defer m2.Close()
		ms[1] = m2
	}
	ctx := context.Background()
	sbs := []*agentproc.Sandbox{none, hosts}
	times := make([][]time.Duration, len(sbs))
	run := func(i int) {
		start := time.Now()
		p, err := ms[i].Start(ctx, agentproc.Request{Command: "true", WorkDir: ws, Sandbox: sbs[i]})
		if err != nil {
			b.Fatal(err)
		}
		if info, err := p.Wait(ctx); err != nil || info.ExitCode == nil || *info.ExitCode != 0 {
			b.Fatalf("%v %+v", err, info)
		}
		times[i] = append(times[i], time.Since(start))
	}
	for i := range sbs {
		run(i) // builds each policy, and the proxy, outside the measurement
		times[i] = nil
	}
	round := 0
	for b.Loop() {
		run(round % 2)
		run((round + 1) % 2)
		round++
	}
	mn, mh := medianDuration(times[0]), medianDuration(times[1])
	b.ReportMetric(float64(mn.Microseconds()), "none-µs")
	b.ReportMetric(float64(mh.Microseconds()), "hosts-µs")
	b.ReportMetric(mh.Seconds()/mn.Seconds(), "hosts-ratio")
}
