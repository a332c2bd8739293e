package taskstats

import (
	"os/exec"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkExitStorm measures what an open Listener costs the machine's
// other exits: a shell runs /bin/true 1,000 times with a Listener open and
// without one, alternated, and the benchmark reports the median time per
// exit of each, their ratio, and the CPU time this process spent per exit
// reading and folding records (the median with a Listener less the median
// without: what starting and waiting for the shell costs is in both).
func BenchmarkExitStorm(b *testing.B) {
	if l, err := Open(); err != nil {
		b.Skipf("no exit records here: %v", err)
	} else if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	const exits = 1000
	storm := func() time.Duration {
		start := time.Now()
		if err := exec.Command("sh", "-c", "i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done").Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start) / exits
	}
	selfCPU := func() time.Duration {
		var ru unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var with, without, cpuWith, cpuWithout []time.Duration
	round := 0
	for b.Loop() {
		listened := func() {
			l, err := Open()
			if err != nil {
				b.Fatal(err)
			}
			before := selfCPU()
			with = append(with, storm())
			cpuWith = append(cpuWith, (selfCPU()-before)/exits)
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		}
		plain := func() {
			before := selfCPU()
			without = append(without, storm())
			cpuWithout = append(cpuWithout, (selfCPU()-before)/exits)
		}
		if round%2 == 0 {
			listened()
			plain()
		} else {
			plain()
			listened()
		}
		round++
	}
	w, wo, c := median(with), median(without), median(cpuWith)-median(cpuWithout)
	b.ReportMetric(float64(w.Nanoseconds())/1e3, "listened-µs/exit")
	b.ReportMetric(float64(wo.Nanoseconds())/1e3, "plain-µs/exit")
	b.ReportMetric(w.Seconds()/wo.Seconds(), "ratio")
	b.ReportMetric(float64(c.Nanoseconds())/1e3, "reader-cpu-µs/exit")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
