//go:build unix

package agentproc_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
// these ratios are the ones the README quotes.
func BenchmarkPaired(b *testing.B) {
	n := throughputBytes()
	big := "head -c " + strconv.FormatInt(n, 10) + " /dev/zero"
	for _, tt := range []struct {
		name    string
		command string
		bytes   int64
	}{
		{"StartWait", "true", 0},
		{"Throughput", big, n},
	} {
		b.Run(tt.name, func(b *testing.B) {
			m := agentproc.New()
			defer m.Close()
			ctx := context.Background()
			var ours, theirs []time.Duration
			for b.Loop() {
				start := time.Now()
				p, err := m.Start(ctx, agentproc.Request{Command: tt.command})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				ours = append(ours, time.Since(start))

				start = time.Now()
				cmd := exec.Command("sh", "-c", tt.command)
				if tt.bytes > 0 {
					cmd.Stdout = io.Discard
				}
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				theirs = append(theirs, time.Since(start))
			}
			a, o := medianDuration(ours), medianDuration(theirs)
			if tt.bytes > 0 {
				b.ReportMetric(float64(tt.bytes)/a.Seconds()/1e6, "agentproc-MB/s")
				b.ReportMetric(float64(tt.bytes)/o.Seconds()/1e6, "os_exec-MB/s")
				b.ReportMetric(o.Seconds()/a.Seconds(), "throughput-ratio")
			} else {
				b.ReportMetric(float64(a.Microseconds()), "agentproc-µs")
				b.ReportMetric(float64(o.Microseconds()), "os_exec-µs")
				b.ReportMetric(a.Seconds()/o.Seconds(), "time-ratio")
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
