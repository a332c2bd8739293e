package agentproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// BenchmarkStopEscaped50 times Stop of a shell with 50 children that exit
// on SIGTERM. "escaped" puts each in a session of its own (setsid), so only
// the marker sweep reaches them; "in-group" is the baseline the process
// group alone handles. Stop returns once the output pipe is closed, that is
// once all 50 are gone.
func BenchmarkStopEscaped50(b *testing.B) {
	for _, bc := range []struct{ name, spawn string }{
		{"escaped", "setsid sleep 1000 &"},
		{"in-group", "sleep 1000 &"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := New(WithGracePeriod(5 * time.Second))
			defer m.Close()
			cmd := fmt.Sprintf("i=0; while [ $i -lt 50 ]; do %s i=$((i+1)); done; exec sleep 1000", bc.spawn)
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				p, err := m.Start(b.Context(), Request{Command: cmd})
				if err != nil {
					b.Fatal(err)
				}
				waitMarkedCount(b, p.ID(), 51) // the 50 and the leader
				b.StartTimer()
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				info, err := p.Stop(ctx)
				cancel()
				total += time.Since(start)
				if err != nil || info.Running {
					b.Fatalf("Stop: got (%+v, %v), want exited", info, err)
				}
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}

// waitMarkedCount polls until n processes carry id's marker, leader
// included (procsMarked skips nothing).
func waitMarkedCount(b *testing.B, id string, n int) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		found := procsMarked(id)
		if len(found) >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("marked processes: got %d, want %d", len(found), n)
		}
		<-tick.C
	}
}

// BenchmarkProcSweep times one snapshot of /proc (every process's group,
// state and marker), over the machine's processes and with 2000 more,
// against the simplest correct alternative for the marker alone (os.ReadDir
// plus os.ReadFile of every environ). scanner+mountns is the pass while a
// tree sandboxed as root is swept (mountnsSweeps), which also reads each
// process's mount namespace.
func BenchmarkProcSweep(b *testing.B) {
	entry := []byte(MarkerEnv + "=00000000-0000-0000-0000-000000000000")
	for _, extra := range []int{0, 2000} {
		for _, ns := range []bool{false, true} {
			name := fmt.Sprintf("extra=%d/scanner", extra)
			if ns {
				name += "+mountns"
			}
			b.Run(name, func(b *testing.B) {
				if ns {
					mountnsSweeps.Add(1)
					defer mountnsSweeps.Add(-1)
				}
				startExtra(b, extra)
				scanned := 0
				for b.Loop() {
					snap := takeSnapshot(markerPass, time.Now())
					if found := snap.markedBy("00000000-0000-0000-0000-000000000000"); snap.err != nil || len(found) != 0 {
						b.Fatalf("snapshot: got (%v, %v), want none", found, snap.err)
					}
					if ns && snap.mountns == nil {
						b.Fatal("snapshot: no mount namespaces read, want them read")
					}
					scanned = snap.scanned
				}
				b.ReportMetric(float64(scanned), "procs")
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
			})
		}
		// One round of the orphan killer (recovery, the host guard, a
		// detached tree's leftovers) for a tree with nothing left: its own
		// pass over /proc, then the probe of the PIDs handed out since.
		b.Run(fmt.Sprintf("extra=%d/orphan-round", extra), func(b *testing.B) {
			startExtra(b, extra)
			k := newTreeKiller([]orphanTree{{id: "00000000-0000-0000-0000-000000000000"}})
			defer k.close()
			for b.Loop() {
				k.round(unix.SIGKILL)
			}
			if k.found[0] != 0 {
				b.Fatalf("orphan round: got %d found, want none", k.found[0])
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
		})
		b.Run(fmt.Sprintf("extra=%d/readfile", extra), func(b *testing.B) {
			startExtra(b, extra)
			scanned := 0
			for b.Loop() {
				entries, err := os.ReadDir("/proc")
				if err != nil {
					b.Fatal(err)
				}
				scanned = 0
				for _, e := range entries {
					if _, err := strconv.Atoi(e.Name()); err != nil {
						continue
					}
					scanned++
					env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
					if err == nil && procfs.HasEnvEntry(env, entry) {
						b.Fatal("unexpected match")
					}
				}
			}
			b.ReportMetric(float64(scanned), "procs")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
		})
	}
}

// startExtra starts n processes in a group of their own, killed when the
// benchmark ends, and waits until they all exist. Each is a forked shell
// blocked opening a FIFO: a fork without an exec is cheap enough to make
// thousands on a small machine.
func startExtra(b *testing.B, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	fifo := filepath.Join(b.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`i=0; while [ $i -lt %d ]; do (read x <"$1") & i=$((i+1)); done; exec sleep 1000`, n), "sh", fifo)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pgid := cmd.Process.Pid
	b.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_ = cmd.Wait()
		// The next benchmark should not scan these while they die.
		deadline := time.Now().Add(time.Minute)
		for groupSize(pgid) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // waiting on the kernel and init, no event to wait on
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for groupSize(pgid) < n+1 {
		if time.Now().After(deadline) {
			b.Fatalf("extra processes: got %d, want %d", groupSize(pgid)-1, n)
		}
		<-tick.C
	}
	b.ResetTimer()
}

// groupSize counts the live members of a process group.
func groupSize(pgid int) int {
	n, _ := countGroup(pgid)
	return n
}
