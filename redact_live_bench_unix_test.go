//go:build unix

package agentproc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// liveBenchSecrets returns n token-shaped secrets (random letters and
// digits, as a service's tokens are), the same for every run.
func liveBenchSecrets(n int) []secretEntry {
	const chars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	rnd := rand.New(rand.NewPCG(1, 2))
	out := make([]secretEntry, n)
	for i := range out {
		b := []byte("tok_")
		for range 36 {
			b = append(b, chars[rnd.IntN(len(chars))])
		}
		out[i] = secretEntry{fmt.Sprintf("REQ%d_TOKEN", i), string(b)}
	}
	return out
}

// BenchmarkRedactLiveSecrets is a stream of a Manager whose requests
// each registered one secret, at 1, 10, 100 and 1,000 of them: 1 MiB of
// log lines in 256 KiB writes, and in 64-byte writes, where what is paid
// per write counts most. Three ways: fixed, the set of all the secrets
// fixed in the stream (as a request's own set was applied before);
// live1, the same set read through the Manager's live sets (registered
// at once, so in one set: fixed against live1 is the per-write load of
// the live sets); live, registered one at a time, as Starts do (a base
// and a recent set, both scanned); live+owner, live beside the empty set
// of the process's owner (the seventh mend's six more stages, passing
// bytes on).
func BenchmarkRedactLiveSecrets(b *testing.B) {
	line := "2026-11-27T01:23:45Z INFO request id=4f3c2a1b9e path=/api/v1/items?page=3 status=200 bytes=5123 dur=12ms user=alice\n"
	data := []byte(strings.Repeat(line, (1<<20)/len(line)))
	for _, n := range []int{1, 10, 100, 1000} {
		entries := liveBenchSecrets(n)
		var oneByOne, atOnce startedSecrets
		for _, e := range entries {
			oneByOne.register([]secretEntry{e})
		}
		atOnce.register(entries)
		oneByOne.wait()
		atOnce.wait()
		if n > 16 && atOnce.sets.Load().recent != nil {
			b.Fatalf("registered at once: got a recent set, want one base")
		}
		all := newRedactSet(entries)
		for _, write := range []int{256 << 10, 64} {
			for _, kind := range []string{"fixed", "live1", "live", "live+owner"} {
				rd := redaction{sets: [2]*redactSet{all}, count: new(atomic.Int64)}
				switch kind {
				case "live1":
					rd = redaction{live: &atOnce.sets, count: rd.count}
				case "live":
					rd = redaction{live: &oneByOne.sets, count: rd.count}
				case "live+owner":
					rd = redaction{live: &oneByOne.sets, owner: new(atomic.Pointer[liveSets]), count: rd.count}
				}
				b.Run(fmt.Sprintf("secrets=%d/write=%d/%s", n, write, kind), func(b *testing.B) {
					r := rd.newRedactor(func([]byte) {})
					b.SetBytes(int64(len(data)))
					cpu := processCPU()
					for b.Loop() {
						for p := data; len(p) > 0; {
							k := min(len(p), write)
							r.write(p[:k])
							p = p[k:]
						}
					}
					b.ReportMetric(float64(b.N)*float64(len(data))/1e6/(processCPU()-cpu).Seconds(), "cpu-MB/s")
					if rd.count.Load() != 0 {
						b.Fatalf("redactions: got %d, want 0", rd.count.Load())
					}
				})
			}
		}
	}
}

// BenchmarkRedactRegister is what registering n secrets one at a time
// (n Starts, each with a new secret) costs a Manager, per secret: the
// recent set rebuilt at each, the base now and then (in the background:
// each round waits for its merges, which ns/secret counts). max-ms is the
// slowest register (what a Start paid), median-us the median one.
func BenchmarkRedactRegister(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		entries := liveBenchSecrets(n)
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			var slowest time.Duration
			var took []time.Duration
			for b.Loop() {
				var ss startedSecrets
				for _, e := range entries {
					t0 := time.Now()
					ss.register([]secretEntry{e})
					d := time.Since(t0)
					slowest = max(slowest, d)
					took = append(took, d)
				}
				ss.wait()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "median-us")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/secret")
			b.ReportMetric(float64(slowest.Microseconds())/1e3, "max-ms")
		})
	}
}

// BenchmarkRedactRegisterOwner is BenchmarkRedactRegister for the Env
// secrets of one owner's n Starts since the seventh mend: each held in
// the owner's set (MaxOwnerSecrets, MaxOwnerSecretBytes) and released at
// once, as by a process that exits before the next Start. Past the bound
// the set lets go of a quarter and rebuilds its base, so a Start with
// 1,000 earlier secrets pays for at most MaxOwnerSecrets of them; the
// Manager-wide register above paid for all of them.
func BenchmarkRedactRegisterOwner(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		entries := liveBenchSecrets(n)
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			var slowest time.Duration
			var took []time.Duration
			for b.Loop() {
				var ss startedSecrets
				for _, e := range entries {
					t0 := time.Now()
					release, err := ss.hold([]secretEntry{e}, MaxOwnerSecrets, MaxOwnerSecretBytes)
					d := time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					release()
					slowest = max(slowest, d)
					took = append(took, d)
				}
				ss.wait()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "median-us")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/secret")
			b.ReportMetric(float64(slowest.Microseconds())/1e3, "max-ms")
		})
	}
}
