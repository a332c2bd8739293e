//go:build unix

package agentproc

import (
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// processCPU is this process's CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRedactScan is the matcher alone: 1 MiB of log lines in 256 KiB
// writes through a stage with 50 token-shaped secrets.
func BenchmarkRedactScan(b *testing.B) {
	benchRedactScan(b, "2026-11-27T01:23:45Z INFO request id=4f3c2a1b9e path=/api/v1/items?page=3 status=200 bytes=5123 dur=12ms user=alice\n")
}

// BenchmarkRedactScanColour is the same with colour codes in every line:
// the shown stage parses them and matches the text between.
func BenchmarkRedactScanColour(b *testing.B) {
	benchRedactScan(b, "2026-11-27T01:23:45Z \x1b[32mINFO\x1b[0m request id=4f3c2a1b9e path=/api/v1/items?page=3 status=\x1b[1m200\x1b[0m bytes=5123 dur=12ms user=alice\n")
}

func benchRedactScan(b *testing.B, line string) {
	var entries []secretEntry
	for i := range 50 {
		entries = append(entries, secretEntry{"T" + string(rune('A'+i%26)) + string(rune('a'+i/26)),
			"tok_" + strings.Repeat(string(rune('a'+i%26)), 4) + "0123456789QzXv" + string(rune('A'+i%26))})
	}
	s := newRedactSet(entries)
	data := []byte(strings.Repeat(line, (1<<20)/len(line)))
	var count atomic.Int64
	r := redaction{sets: [2]*redactSet{s}, count: &count}.newRedactor(func([]byte) {})
	b.SetBytes(int64(len(data)))
	cpu := processCPU()
	for b.Loop() {
		for p := data; len(p) > 0; {
			n := min(len(p), 256<<10)
			r.write(p[:n])
			p = p[n:]
		}
	}
	// CPU time moves far less with the load of a shared machine than
	// the wall time ns/op counts.
	b.ReportMetric(float64(b.N)*float64(len(data))/1e6/(processCPU()-cpu).Seconds(), "cpu-MB/s")
	if count.Load() != 0 {
		b.Fatalf("redactions: got %d, want 0", count.Load())
	}
}
