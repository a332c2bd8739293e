//go:build unix

package agentproc_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Every benchmark here has an agentproc and an os_exec variant doing the
// same work in the same run; `make bench` prints their ratios.

func BenchmarkStartWait(b *testing.B) {
	b.Run("agentproc", func(b *testing.B) {
		m := agentproc.New()
		defer m.Close()
		ctx := context.Background()
		for b.Loop() {
			p, err := m.Start(ctx, agentproc.Request{Command: "true"})
			if err != nil {
				b.Fatal(err)
			}
			if info, err := p.Wait(ctx); err != nil || *info.ExitCode != 0 {
				b.Fatalf("Wait: %+v %v", info, err)
			}
		}
	})
	b.Run("os_exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOutput times Output() of an exited process whose default 16 KiB
// head and 16 KiB tail are full of 39-byte lines, against turning the same
// 32 KiB from os/exec's CombinedOutput into a string: the least a caller of
// os/exec does to show output.
func BenchmarkOutput(b *testing.B) {
	const lines = 2000 // 78,000 bytes: head and tail full, the middle dropped
	command := `i=0; while [ $i -lt 2000 ]; do printf '%038d\n' $i; i=$((i+1)); done`
	b.Run("agentproc", func(b *testing.B) {
		m := agentproc.New()
		defer m.Close()
		p, err := m.Start(b.Context(), agentproc.Request{Command: command})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		if tr := p.Output().Truncated; tr == nil || tr.OriginalBytes != lines*39 {
			b.Fatalf("Truncated: got %+v, want %d original bytes", tr, lines*39)
		}
		b.ReportAllocs()
		cpu := processCPU()
		for b.Loop() {
			_ = p.Output()
		}
		reportCPU(b, cpu)
	})
	b.Run("os_exec", func(b *testing.B) {
		out, err := exec.Command("sh", "-c", command).CombinedOutput()
		if err != nil {
			b.Fatal(err)
		}
		kept := out[:32<<10]
		b.ReportAllocs()
		cpu := processCPU()
		for b.Loop() {
			_ = string(kept)
		}
		reportCPU(b, cpu)
	})
}

// BenchmarkIdleProcess measures what an idle running process costs the
// host: the growth of this process's RSS and goroutine count per process
// while 200 children sleep, against os/exec supervising the same children
// with their output captured (a bytes.Buffer, which makes os/exec copy the
// pipe in a goroutine) and a goroutine blocked in Wait: the least a caller
// of os/exec needs to keep the output and learn the exit. In both, each idle
// process also holds an OS thread blocked in wait; the figures are taken
// once those threads exist.
func BenchmarkIdleProcess(b *testing.B) {
	const n = 200
	const command = "exec sleep 1000"
	measure := func(b *testing.B, start func(), stop func()) {
		// One round first, so that both variants find the OS threads that
		// n goroutines blocked in wait need already made: the first round
		// in a process costs about 25 KiB more per process for them.
		start()
		stop()
		var kib, gs []float64
		for b.Loop() {
			// Two collections empty the sync.Pools (and their victim
			// caches) of the previous round, and FreeOSMemory returns the
			// pages, so that what start touches shows in the RSS.
			runtime.GC()
			debug.FreeOSMemory()
			rss, g := rssBytes(), runtime.NumGoroutine()
			start()
			kib = append(kib, float64(rssBytes()-rss)/1024/n)
			gs = append(gs, float64(runtime.NumGoroutine()-g)/n)
			b.StopTimer()
			stop()
			b.StartTimer()
		}
		slices.Sort(kib)
		slices.Sort(gs)
		if runtime.GOOS == "linux" {
			b.ReportMetric(kib[len(kib)/2], "host-KiB/proc")
		}
		b.ReportMetric(gs[len(gs)/2], "goroutines/proc")
	}
	b.Run("agentproc", func(b *testing.B) {
		var m *agentproc.Manager
		measure(b, func() {
			m = agentproc.New()
			for range n {
				if _, err := m.Start(b.Context(), agentproc.Request{Command: command}); err != nil {
					b.Fatal(err)
				}
			}
		}, func() { _ = m.Close() })
	})
	b.Run("os_exec", func(b *testing.B) {
		var cmds []*exec.Cmd
		var waited sync.WaitGroup
		measure(b, func() {
			cmds = cmds[:0]
			for range n {
				cmd := exec.Command("sh", "-c", command)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				cmds = append(cmds, cmd)
				waited.Go(func() { _ = cmd.Wait() })
			}
		}, func() {
			for _, cmd := range cmds {
				_ = cmd.Process.Kill()
			}
			waited.Wait()
		})
	})
}

// processCPU returns the CPU time this process has used, user plus system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per iteration since start, "cpu-ns/op".
// On a shared machine it moves far less with the load than ns/op, which
// also counts the time spent waiting for a core.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((processCPU()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// throughputBytes is what the child prints per iteration: 1 GiB, or 64 MiB
// under -short.
func throughputBytes() int64 {
	if testing.Short() {
		return 64 << 20
	}
	return 1 << 30
}

func BenchmarkThroughput(b *testing.B) {
	n := throughputBytes()
	command := "head -c " + strconv.FormatInt(n, 10) + " /dev/zero"
	b.Run("agentproc", func(b *testing.B) {
		m := agentproc.New()
		defer m.Close()
		ctx := context.Background()
		b.SetBytes(n)
		var growth int64
		for b.Loop() {
			before := rssBytes()
			p, err := m.Start(ctx, agentproc.Request{Command: command})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			if got := p.Output().Truncated; got == nil || got.OriginalBytes != n {
				b.Fatalf("Truncated: got %+v, want %d original bytes", got, n)
			}
			growth = max(growth, rssBytes()-before)
		}
		if growth >= 0 {
			b.ReportMetric(float64(growth)/1024, "rss-growth-KiB")
		}
	})
	b.Run("os_exec", func(b *testing.B) {
		b.SetBytes(n)
		var growth int64
		for b.Loop() {
			before := rssBytes()
			cmd := exec.Command("sh", "-c", command)
			cmd.Stdout = io.Discard
			cmd.Stderr = io.Discard
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			growth = max(growth, rssBytes()-before)
		}
		if growth >= 0 {
			b.ReportMetric(float64(growth)/1024, "rss-growth-KiB")
		}
	})
}

// BenchmarkPaired runs the agentproc and os_exec variants of the same work
// alternately inside one benchmark and reports the median of each and their
// ratio. On a shared machine, load drifts between two sub-benchmarks run
// one after the other; alternating run by run cancels most of that drift, so
// these ratios are the ones docs/benchmarks.md records and the README quotes.
//
// StartWait has two baselines: Run with no output (the child's output goes
// to the null device), and CombinedOutput, which is what a caller of
// os/exec writes to get the output agentproc keeps. StartWaitNoOOMScore is
// the same without the default oom_score_adj raise (WithOOMScoreDelta(0)).
func BenchmarkPaired(b *testing.B) {
	n := throughputBytes()
	big := "head -c " + strconv.FormatInt(n, 10) + " /dev/zero"
	for _, tt := range []struct {
		name    string
		command string
		bytes   int64
		opts    []agentproc.Option
	}{
		{"StartWait", "true", 0, nil},
		// The default raise of each child's oom_score_adj is a write to
		// /proc/PID of every new process; this row shows its share.
		{"StartWaitNoOOMScore", "true", 0, []agentproc.Option{agentproc.WithOOMScoreDelta(0)}},
		{"Throughput", big, n, nil},
	} {
		b.Run(tt.name, func(b *testing.B) {
			m := agentproc.New(tt.opts...)
			defer m.Close()
			ctx := context.Background()
			var ours, run, combined []time.Duration
			variants := []func(){
				func() {
					start := time.Now()
					p, err := m.Start(ctx, agentproc.Request{Command: tt.command})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := p.Wait(ctx); err != nil {
						b.Fatal(err)
					}
					ours = append(ours, time.Since(start))
				},
				func() {
					start := time.Now()
					cmd := exec.Command("sh", "-c", tt.command)
					if tt.bytes > 0 {
						cmd.Stdout = io.Discard
					}
					if err := cmd.Run(); err != nil {
						b.Fatal(err)
					}
					run = append(run, time.Since(start))
				},
			}
			if tt.bytes == 0 {
				variants = append(variants, func() {
					start := time.Now()
					if _, err := exec.Command("sh", "-c", tt.command).CombinedOutput(); err != nil {
						b.Fatal(err)
					}
					combined = append(combined, time.Since(start))
				})
			}
			// Each round starts with the next variant, so that none of
			// them always follows the same one.
			round := 0
			for b.Loop() {
				for i := range variants {
					variants[(round+i)%len(variants)]()
				}
				round++
			}
			a, o := medianDuration(ours), medianDuration(run)
			if tt.bytes > 0 {
				b.ReportMetric(float64(tt.bytes)/a.Seconds()/1e6, "agentproc-MB/s")
				b.ReportMetric(float64(tt.bytes)/o.Seconds()/1e6, "os_exec-MB/s")
				b.ReportMetric(o.Seconds()/a.Seconds(), "throughput-ratio")
			} else {
				c := medianDuration(combined)
				b.ReportMetric(float64(a.Microseconds()), "agentproc-µs")
				b.ReportMetric(float64(o.Microseconds()), "os_exec-µs")
				b.ReportMetric(float64(c.Microseconds()), "combined-µs")
				b.ReportMetric(a.Seconds()/o.Seconds(), "time-ratio")
				b.ReportMetric(a.Seconds()/c.Seconds(), "combined-ratio")
			}
		})
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// rssBytes returns this process's resident set size, or -1 where
// /proc is not available.
func rssBytes() int64 {
	if runtime.GOOS != "linux" {
		return -1
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return kb * 1024
		}
	}
	return -1
}

// BenchmarkClose times Manager.Close of n running `exec sleep 1000` (each
// ends on SIGTERM), against os/exec sending SIGTERM to n such commands and
// waiting for each. Starting them is not timed. Close must stay linear in
// n: `make bench` prints the n=1000 : n=125 ratio of each variant.
func BenchmarkClose(b *testing.B) {
	for _, n := range []int{125, 250, 500, 1000} {
		b.Run(fmt.Sprintf("n=%d/agentproc", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				m := agentproc.New()
				for range n {
					if _, err := m.Start(b.Context(), agentproc.Request{Command: "exec sleep 1000"}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("n=%d/os_exec", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				cmds := make([]*exec.Cmd, n)
				for i := range cmds {
					cmds[i] = exec.Command("sh", "-c", "exec sleep 1000")
					cmds[i].SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
					if err := cmds[i].Start(); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				for _, c := range cmds {
					_ = c.Process.Signal(syscall.SIGTERM)
				}
				for _, c := range cmds {
					_ = c.Wait()
				}
			}
		})
	}
}
