package agentproc

import (
	"fmt"
	"os/exec"
	"testing"
)

// BenchmarkPortScan measures one scan of listeningPorts over 1, 10 and 100
// trees (each a sleeping process of its own group), so the cost per scan
// can be compared at scale.
func BenchmarkPortScan(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("trees=%d", n), func(b *testing.B) {
			trees := make([]portTree, n)
			for i := range trees {
				cmd := exec.Command("sleep", "600")
				sys := &sysProc{}
				if err := sys.prepare(cmd); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
				trees[i] = portTree{leader: cmd.Process.Pid, id: fmt.Sprint("bench-", i)}
			}
			var cache portCache
			b.ResetTimer()
			for b.Loop() {
				if _, err := listeningPorts(&cache, trees); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
