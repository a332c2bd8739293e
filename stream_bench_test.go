//go:build unix

package agentproc_test

import (
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

var streamBytes = flag.Int64("stream.bytes", 0,
	"bytes the child writes in BenchmarkFollow; 0 means 1 GiB, or 16 MiB with -short")

func benchStreamBytes() int64 {
	switch {
	case *streamBytes > 0:
		return *streamBytes
	case testing.Short():
		return 16 << 20
	}
	return 1 << 30
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)*p/100, len(s)-1)]
}

// BenchmarkFollow measures how much a reader following a stream with
// WaitOutput slows the child, against the same child with nobody reading,
// the same child writing an output log, and plain os/exec copying to
// io.Discard. Each iteration runs all four; the metrics are medians.
func BenchmarkFollow(b *testing.B) {
	n := benchStreamBytes()
	ctx := context.Background()
	m := agentproc.New()
	defer m.Close()
	logged := agentproc.New(agentproc.WithOutputLog(b.TempDir(), 0), agentproc.WithRetention(0, 0))
	defer logged.Close()
	req := helperRequest(b, "stream")
	req.Env[helperBytesEnv] = strconv.FormatInt(n, 10)

	run := func(m *agentproc.Manager, follow bool) (time.Duration, int64) {
		start := time.Now()
		p, err := m.Start(req)
		if err != nil {
			b.Fatal(err)
		}
		seen := make(chan int64, 1)
		if follow {
			go func() {
				var offset, data int64
				for {
					c, err := p.WaitOutput(ctx, offset)
					if err != nil {
						b.Error(err)
						break
					}
					data += int64(len(c.Data))
					offset = c.Next
					if c.EOF {
						break
					}
				}
				seen <- data
			}()
		}
		info, err := p.Wait(ctx)
		elapsed := time.Since(start)
		if err != nil || exitCode(info) != 0 {
			b.Fatalf("child: %+v %v", info, err)
		}
		if !follow {
			return elapsed, 0
		}
		return elapsed, <-seen
	}
	plainExec := func() time.Duration {
		start := time.Now()
		cmd := exec.Command("sh", "-c", req.Command)
		cmd.Env = append(os.Environ(), helperEnv+"=stream", helperBytesEnv+"="+strconv.FormatInt(n, 10))
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}

	var alone, followed, withLog, plain []time.Duration
	var seen, total int64
	for b.Loop() {
		plain = append(plain, plainExec())
		d, _ := run(m, false)
		alone = append(alone, d)
		d, s := run(m, true)
		followed = append(followed, d)
		seen += s
		total += n
		d, _ = run(logged, false)
		withLog = append(withLog, d)
		_ = logged.List() // drops the exited process and removes its log
	}
	mbps := func(d time.Duration) float64 { return float64(n) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(median(plain)), "exec-MB/s")
	b.ReportMetric(mbps(median(alone)), "alone-MB/s")
	b.ReportMetric(mbps(median(followed)), "followed-MB/s")
	b.ReportMetric(mbps(median(withLog)), "logged-MB/s")
	b.ReportMetric(100*(median(followed).Seconds()/median(alone).Seconds()-1), "follow-slowdown-%")
	b.ReportMetric(100*(median(withLog).Seconds()/median(alone).Seconds()-1), "log-slowdown-%")
	b.ReportMetric(100*float64(seen)/float64(total), "seen-%")
}

// BenchmarkWaitOutputLatency measures the time from a child's write to the
// return of a WaitOutput that was waiting for it. The child writes its wall
// clock, so the latency includes the pipe, the output reader, the buffer
// and the wake-up of the waiter.
func BenchmarkWaitOutputLatency(b *testing.B) {
	ctx := context.Background()
	m := agentproc.New()
	defer m.Close()
	fifo := filepath.Join(b.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	req := helperRequest(b, "ticks")
	req.Env[helperFIFOEnv] = fifo
	p, err := m.Start(req)
	if err != nil {
		b.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	var latencies []time.Duration
	var offset int64
	for b.Loop() {
		if _, err := w.Write([]byte{1}); err != nil {
			b.Fatal(err)
		}
		var line string
		for !strings.HasSuffix(line, "\n") {
			c, err := p.WaitOutput(ctx, offset)
			if err != nil {
				b.Fatal(err)
			}
			line += c.Data
			offset = c.Next
		}
		woke := time.Now().UnixNano()
		wrote, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Duration(woke-wrote))
	}
	_ = w.Close()
	if _, err := p.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(median(latencies).Nanoseconds())/1e3, "median-µs")
	b.ReportMetric(float64(percentile(latencies, 90).Nanoseconds())/1e3, "p90-µs")
}
