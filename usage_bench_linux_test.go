package agentproc_test

import (
	"fmt"
	"testing"

	"github.com/agentproc/agentproc"
)

// BenchmarkUsage measures one Process.Usage read of a sleeping tree, with
// the /proc sums and with the tree's cgroup, against Ports, which finds the
// same members (treeMembers) and reads their descriptors instead.
func BenchmarkUsage(b *testing.B) {
	for _, mode := range usageModes {
		m := agentproc.New()
		b.Cleanup(func() { _ = m.Close() })
		p, err := m.Start(b.Context(), agentproc.Request{Command: "sleep 1000", Limits: mode.limits})
		if err != nil {
			b.Skipf("Start: %v", err)
		}
		b.Run(mode.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := p.Usage(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/ports", func(b *testing.B) {
			for b.Loop() {
				if _, err := p.Ports(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUsageMany reads the usage of 1, 10 and 100 sleeping trees
// without cgroups: one Process.Usage each, against one Scope.Usage for all.
func BenchmarkUsageMany(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		m := agentproc.New()
		b.Cleanup(func() { _ = m.Close() })
		procs := make([]*agentproc.Process, n)
		for i := range procs {
			p, err := m.Start(b.Context(), agentproc.Request{Command: "exec sleep 1000"})
			if err != nil {
				b.Fatal(err)
			}
			procs[i] = p
		}
		b.Run(fmt.Sprintf("each/%d", n), func(b *testing.B) {
			for b.Loop() {
				for _, p := range procs {
					if _, err := p.Usage(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("scope/%d", n), func(b *testing.B) {
			for b.Loop() {
				if u, err := m.Scope("").Usage(b.Context()); err != nil || len(u) != n {
					b.Fatalf("got %d, %v; want %d, nil", len(u), err, n)
				}
			}
		})
	}
}
