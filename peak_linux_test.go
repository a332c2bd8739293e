package agentproc_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

func init() {
	// "fat-host" is a host that has touched 300 MiB, and holds them, when
	// it runs `true`, then dd with a buffer 100 MiB above the host's own
	// high-water mark (under -race the host holds more than it touched),
	// without a cgroup, and prints the two peaks Info reports and dd's
	// buffer size.
	agentproc.RegisterHelper("fat-host", func() int {
		fat := touch(300)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		m := agentproc.New()
		defer m.Close()
		hwm, ok := agentproc.HostHWM()
		if !ok {
			fmt.Println("fail: no VmHWM")
			return 1
		}
		bs := hwm + 100<<20
		if !printPeaks(ctx, m, "true", fmt.Sprintf("dd if=/dev/zero of=/dev/null bs=%d count=1 2>/dev/null", bs)) {
			return 1
		}
		fmt.Println(bs)
		runtime.KeepAlive(fat)
		return 0
	}, false)
}

func init() {
	// "fat-host-small" is a host that has touched 300 MiB, and holds them,
	// when it runs, without a cgroup, dd with a 64 MiB buffer twice: as
	// the leader itself (the shell execs its last command) and as a child
	// the shell reaps before it goes on. It prints the two peaks Info
	// reports and its own VmHWM.
	agentproc.RegisterHelper("fat-host-small", func() int {
		fat := touch(300)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		m := agentproc.New()
		defer m.Close()
		dd := "dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null"
		if !printPeaks(ctx, m, dd, dd+"; true") {
			return 1
		}
		hwm, ok := agentproc.HostHWM()
		if !ok {
			fmt.Println("fail: no VmHWM")
			return 1
		}
		fmt.Println(hwm)
		runtime.KeepAlive(fat)
		return 0
	}, false)
}

// printPeaks runs each command on m in turn, from a fat host helper, and
// prints the peak memory Info reports for it, a line each; on a failure it
// prints "fail" and the error instead and returns false.
func printPeaks(ctx context.Context, m *agentproc.Manager, cmds ...string) bool {
	for _, cmd := range cmds {
		p, err := m.Start(ctx, agentproc.Request{Command: cmd})
		if err != nil {
			fmt.Println("fail", err)
			return false
		}
		info, err := p.Wait(ctx)
		if err != nil {
			fmt.Println("fail", err)
			return false
		}
		fmt.Println(info.MaxRSS)
	}
	return true
}

// runFatHost runs the test binary as the fat host helper mode names and
// returns the three numbers it prints (two peaks, then a size); what the
// third is, want says for a failure's message.
func runFatHost(t *testing.T, mode, want string) [3]int64 {
	t.Helper()
	m := newManager(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := mustStart(t, m, agentproc.Request{Command: "exec " + shellQuote(exe), Env: map[string]string{agentproc.HelperEnv: mode}})
	// The host touches 300 MiB and more under -race: a longer deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	defer cancel()
	info, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(p.Output().Text)
	if info.ExitCode == nil || *info.ExitCode != 0 || len(lines) != 3 {
		t.Fatalf("fat host: got exit %v and output %q, want two peaks and %s", info.ExitCode, p.Output().Text, want)
	}
	var out [3]int64
	for i, l := range lines {
		if out[i], err = strconv.ParseInt(l, 10, 64); err != nil {
			t.Fatalf("fat host: got output %q, want numbers", p.Output().Text)
		}
	}
	return out
}

// touch allocates n MiB and writes a byte on every page.
func touch(n int) []byte {
	b := make([]byte, n<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

// TestPeakMemoryIsTheTrees: without a cgroup, the peak memory Info reports
// is the tree's, never the host's. A host that has touched 300 MiB runs
// `true`: its leader's ru_maxrss reads 300 MiB (Go's child runs on the
// host's memory until exec, and exec keeps that high-water mark), which was
// reported as the tree's; now it is unknown (0) or the tree's own few MiB.
// A tree that touches 400 MiB, more than the host (dd filling a 400 MiB
// buffer), is still reported.
func TestPeakMemoryIsTheTrees(t *testing.T) {
	t.Parallel()
	out := runFatHost(t, agentproc.UseHelper("fat-host"), "a size")
	peakTrue, peakDD, bs := out[0], out[1], out[2]
	if peakTrue > 32<<20 {
		t.Errorf("peak of true run by a host holding 300 MiB: got %s, want the tree's own (at most 32 MiB) or unknown (0)", fmtMiB(peakTrue))
	}
	if peakDD < bs || peakDD > bs+64<<20 {
		t.Errorf("peak of dd filling a %s buffer: got %s, want %s plus at most 64 MiB", fmtMiB(bs), fmtMiB(peakDD), fmtMiB(bs))
	}
	t.Logf("host holding 300 MiB: true peaked at %s, dd with a %s buffer at %s", fmtMiB(peakTrue), fmtMiB(bs), fmtMiB(peakDD))
}

// TestPeakMemoryBelowTheHosts: a tree that uses less than its host has
// touched is reported with its own peak, not unknown (0) and never the
// host's. A host holding 300 MiB runs dd with a 64 MiB buffer, as the
// leader and as a child the shell reaps; each peak is dd's buffer plus at
// most 16 MiB (dd's and the shell's own pages). The peaks come from the
// kernel's exit records, which only root in the initial namespaces may
// read: elsewhere they are unknown (0), and the test skips saying why.
func TestPeakMemoryBelowTheHosts(t *testing.T) {
	t.Parallel()
	if ok, err := agentproc.ExitRecordsAvailable(); !ok {
		// Root outside a container runs it (CI does); elsewhere this peak
		// is unknown (0), as TestPeakMemoryIsTheTrees checks.
		t.Skipf("the exit records need root in the initial user and PID namespaces: %v", err)
	}
	out := runFatHost(t, agentproc.UseHelper("fat-host-small"), "a VmHWM")
	hwm := out[2]
	for i, what := range []string{"dd as the leader", "dd as a reaped child"} {
		peak := out[i]
		if peak < 64<<20 || peak > 80<<20 {
			t.Errorf("peak of %s with a 64 MiB buffer under a host of %s: got %s, want 64 to 80 MiB", what, fmtMiB(hwm), fmtMiB(peak))
		}
		t.Logf("%s under a host of %s: %s", what, fmtMiB(hwm), fmtMiB(peak))
	}
}

// TestPeakHoldReleasedOnce: a Manager closed twice drops its hold on the
// exit listener once, so the listener closes with the last Manager (a
// second drop left it open for good, its reader a leaked goroutine). Not
// parallel: it counts the process's holds.
func TestPeakHoldReleasedOnce(t *testing.T) {
	if ok, err := agentproc.ExitRecordsAvailable(); !ok {
		t.Skipf("no exit records here, so no hold to count: %v", err)
	}
	before := agentproc.ExitRecordHolds()
	other := newManager(t) // holds the listener across the double close
	mustWait(t, mustStart(t, other, agentproc.Request{Command: "true"}))
	m := agentproc.New()
	mustWait(t, mustStart(t, m, agentproc.Request{Command: "true"}))
	if got := agentproc.ExitRecordHolds(); got != before+2 {
		t.Fatalf("holds with two Managers: got %d, want %d", got, before+2)
	}
	for range 2 {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := agentproc.ExitRecordHolds(); got != before+1 {
		t.Errorf("holds after closing one Manager twice: got %d, want %d", got, before+1)
	}
}
