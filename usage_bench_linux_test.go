package agentproc_test

import (
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
