package agentproc_test

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling OS thread. On a shared,
// overloaded machine wall time per op mostly measures waiting for a core;
// a benchmark that locks its goroutine to its thread can report this as
// well, which counts only the time spent running.
func threadCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportThreadCPU runs loop on one locked thread and reports its CPU time
// per op as "cpu-ns/op".
func reportThreadCPU(b *testing.B, loop func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadCPU(b)
	loop()
	b.ReportMetric(float64(threadCPU(b)-before)/float64(b.N), "cpu-ns/op")
}
