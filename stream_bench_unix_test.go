//go:build unix

package agentproc_test

import (
	"bufio"
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
	"bytes the child writes per iteration of BenchmarkFollow and BenchmarkOutputLog; 0 means 1 GiB, or 16 MiB with -short")

func benchStreamBytes() int64 {
	switch {
	case *streamBytes > 0:
		return *streamBytes
	case testing.Short():
		return 16 << 20
	}
	return 1 << 30
}

// streamRequest runs the "stream" helper writing n bytes of text.
func streamRequest(b *testing.B, n int64) agentproc.Request {
	req := helperRequest(b, "stream")
	req.Env[helperBytesEnv] = strconv.FormatInt(n, 10)
	return req
}

// runStream starts req and waits for its exit. With follow, a reader
// follows the output with WaitOutput meanwhile; runStream then returns how
// many bytes of Data it saw.
func runStream(b *testing.B, m *agentproc.Manager, req agentproc.Request, follow bool) int64 {
	ctx := context.Background()
	p, err := m.Start(ctx, req)
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
	if err != nil || exitCode(info) != 0 {
		b.Fatalf("child: %+v %v", info, err)
	}
	if !follow {
		return 0
	}
	return <-seen
}

// BenchmarkFollow: the same child writing a stream, followed by a reader
// using WaitOutput (agentproc), with nobody reading (idle), and under plain
// os/exec copying to io.Discard. agentproc/idle is the follower's cost to
// the child; seen-% is the share of the bytes the follower got (the rest
// was dropped from the middle before it could read it). paired runs the
// first two alternately and reports their medians and ratio, which load
// drifting between sub-benchmarks run one after the other does not skew;
// docs/benchmarks.md records it.
func BenchmarkFollow(b *testing.B) {
	const followPairs = 5
	n := benchStreamBytes()
	b.Run("paired", func(b *testing.B) {
		m := agentproc.New()
		defer m.Close()
		req := streamRequest(b, n)
		var followed, idle []time.Duration
		round := 0
		for b.Loop() {
			// A 1 GiB round takes about half a second, so b.Loop alone
			// would give each run two or three: too few for a median.
			for range followPairs {
				for i := range 2 {
					follow := (round+i)%2 == 0
					start := time.Now()
					runStream(b, m, req, follow)
					if follow {
						followed = append(followed, time.Since(start))
					} else {
						idle = append(idle, time.Since(start))
					}
				}
				round++
			}
		}
		f, o := median(followed), median(idle)
		b.ReportMetric(float64(n)/f.Seconds()/1e6, "agentproc-MB/s")
		b.ReportMetric(float64(n)/o.Seconds()/1e6, "idle-MB/s")
		b.ReportMetric(f.Seconds()/o.Seconds(), "time-ratio")
	})
	b.Run("agentproc", func(b *testing.B) {
		m := agentproc.New()
		defer m.Close()
		req := streamRequest(b, n)
		b.SetBytes(n)
		var seen, total int64
		for b.Loop() {
			seen += runStream(b, m, req, true)
			total += n
		}
		b.ReportMetric(100*float64(seen)/float64(total), "seen-%")
	})
	b.Run("idle", func(b *testing.B) {
		m := agentproc.New()
		defer m.Close()
		req := streamRequest(b, n)
		b.SetBytes(n)
		for b.Loop() {
			runStream(b, m, req, false)
		}
	})
	b.Run("os_exec", func(b *testing.B) {
		req := streamRequest(b, n)
		b.SetBytes(n)
		for b.Loop() {
			cmd := exec.Command("sh", "-c", req.Command)
			cmd.Env = append(os.Environ(), agentproc.HelperEnv+"="+agentproc.UseHelper("stream"), helperBytesEnv+"="+strconv.FormatInt(n, 10))
			cmd.Stdout = io.Discard
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOutputLog: the same child with every byte also written to an
// output log (agentproc) and without a log (discard).
func BenchmarkOutputLog(b *testing.B) {
	n := benchStreamBytes()
	for _, variant := range []string{"agentproc", "discard"} {
		b.Run(variant, func(b *testing.B) {
			opts := []agentproc.Option{agentproc.WithRetention(0, 0)}
			if variant == "agentproc" {
				opts = append(opts, agentproc.WithOutputLog(b.TempDir(), 0))
			}
			m := agentproc.New(opts...)
			defer m.Close()
			req := streamRequest(b, n)
			b.SetBytes(n)
			for b.Loop() {
				runStream(b, m, req, false)
				_ = m.List() // drops the exited process, removing its log
			}
		})
	}
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

// ticksChild starts the "ticks" helper through start and returns the FIFO
// that makes it write.
func ticksChild(b *testing.B, start func(agentproc.Request)) *os.File {
	fifo := filepath.Join(b.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	req := helperRequest(b, "ticks")
	req.Env[helperFIFOEnv] = fifo
	start(req)
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// reportLatencies reports the median and 90th percentile wake-up latency.
func reportLatencies(b *testing.B, latencies []time.Duration) {
	b.ReportMetric(float64(median(latencies).Nanoseconds())/1e3, "median-µs")
	b.ReportMetric(float64(percentile(latencies, 90).Nanoseconds())/1e3, "p90-µs")
}

// latencySince parses the child's wall clock from line and returns how long
// ago it was taken.
func latencySince(b *testing.B, line string) time.Duration {
	woke := time.Now().UnixNano()
	wrote, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(woke - wrote)
}

// BenchmarkWaitOutputLatency: the time from a child's write to the return
// of a WaitOutput waiting for it (agentproc), against a blocking read of the
// child's stdout pipe (os_exec). The child writes its wall clock, so the
// figure covers the pipe, the output reader, the buffer and the wake-up.
func BenchmarkWaitOutputLatency(b *testing.B) {
	b.Run("agentproc", func(b *testing.B) {
		ctx := context.Background()
		m := agentproc.New()
		defer m.Close()
		var p *agentproc.Process
		w := ticksChild(b, func(req agentproc.Request) {
			var err error
			if p, err = m.Start(ctx, req); err != nil {
				b.Fatal(err)
			}
		})
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
			latencies = append(latencies, latencySince(b, line))
		}
		_ = w.Close()
		if _, err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		reportLatencies(b, latencies)
	})
	b.Run("os_exec", func(b *testing.B) {
		var cmd *exec.Cmd
		var out *bufio.Reader
		w := ticksChild(b, func(req agentproc.Request) {
			cmd = exec.Command("sh", "-c", req.Command)
			cmd.Env = os.Environ()
			for k, v := range req.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			out = bufio.NewReader(stdout)
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
		})
		var latencies []time.Duration
		for b.Loop() {
			if _, err := w.Write([]byte{1}); err != nil {
				b.Fatal(err)
			}
			line, err := out.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			latencies = append(latencies, latencySince(b, line))
		}
		_ = w.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		reportLatencies(b, latencies)
	})
}
