//go:build unix

package agentproc_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

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
			p, err := m.Start(agentproc.Request{Command: "true"})
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
			p, err := m.Start(agentproc.Request{Command: command})
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
