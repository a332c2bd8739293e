package agentproc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentproc/agentproc"
)

// BenchmarkStateDir/StartWait alternates Start+Wait of `sh -c true` on a
// Manager with WithStateDir and on one without, run by run (see
// BenchmarkPaired for why), and reports both medians and their ratio: the
// cost of writing the records. AGENTPROC_BENCH_STATEDIR picks the file
// system (the default is the test's temporary dir).
func BenchmarkStateDir(b *testing.B) {
	b.Run("StartWait", func(b *testing.B) {
		with := agentproc.New(agentproc.WithStateDir(stateBenchDir(b)))
		defer with.Close()
		without := agentproc.New()
		defer without.Close()
		ctx := context.Background()
		run := func(m *agentproc.Manager) time.Duration {
			start := time.Now()
			p, err := m.Start(agentproc.Request{Command: "true"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			return time.Since(start)
		}
		// Steady state: once retention holds DefaultMaxExited processes,
		// every Start reuses the record slot of a dropped one; the first
		// DefaultMaxExited Starts create their slot files.
		for range agentproc.DefaultMaxExited + 16 {
			run(with)
			run(without)
		}
		var ours, theirs []time.Duration
		for b.Loop() {
			ours = append(ours, run(with))
			theirs = append(theirs, run(without))
		}
		a, o := medianDuration(ours), medianDuration(theirs)
		b.ReportMetric(float64(a.Microseconds()), "statedir-µs")
		b.ReportMetric(float64(o.Microseconds()), "plain-µs")
		b.ReportMetric(a.Seconds()/o.Seconds(), "time-ratio")
	})
}

// BenchmarkRecover measures a new Manager recovering n orphaned trees that
// are still running (a host whose guard was also killed): from New to
// Recovered, which stops every tree (they exit on SIGTERM) and lists it.
func BenchmarkRecover(b *testing.B) {
	for _, n := range []int{2, 20, 200} {
		b.Run(fmt.Sprintf("orphans=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				cmds := make([]*exec.Cmd, n)
				for i := range cmds {
					id := uuid.NewString()
					cmd := exec.Command("sleep", "300")
					cmd.Env = append(os.Environ(), agentproc.MarkerEnv+"="+id)
					cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					cmds[i] = cmd
					pid := cmd.Process.Pid
					writeRecord(b, dir, id, map[string]any{
						"leader": map[string]any{"pid": pid, "start": startTicks(b, pid), "boot_id": currentBoot()},
					})
				}
				b.StartTimer()
				m := agentproc.New(agentproc.WithStateDir(dir))
				infos, err := m.Recovered(context.Background())
				b.StopTimer()
				if err != nil || len(infos) != n {
					b.Fatalf("Recovered: got %d, %v, want %d", len(infos), err, n)
				}
				for _, info := range infos {
					if info.Leftovers != 1 {
						b.Fatalf("recovered %+v, want one process stopped", info)
					}
				}
				for _, cmd := range cmds {
					_ = cmd.Wait()
				}
				_ = m.Close()
				b.StartTimer()
			}
		})
	}
}

// stateBenchDir is the state dir of the benchmarks: under
// AGENTPROC_BENCH_STATEDIR when set (to compare file systems), else a
// temporary directory.
func stateBenchDir(b *testing.B) string {
	if root := os.Getenv("AGENTPROC_BENCH_STATEDIR"); root != "" {
		dir, err := os.MkdirTemp(root, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}
