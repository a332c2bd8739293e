package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

func init() {
	// alloc touches every page of usageAllocBytes of heap, prints "ready",
	// then waits to be stopped with the memory still held.
	agentproc.RegisterHelper("alloc", func() int {
		buf := make([]byte, usageAllocBytes)
		for i := 0; i < len(buf); i += os.Getpagesize() {
			buf[i] = 1
		}
		fmt.Println("ready")
		time.Sleep(time.Hour) // a child waiting to be stopped, not synchronisation
		runtime.KeepAlive(buf)
		return 0
	}, false)
}

const usageAllocBytes = 64 << 20

// usageModes runs a test with the /proc sums (no cgroup) and with the
// tree's own cgroup (Limits), whose counters Usage then reads.
var usageModes = []struct {
	name   string
	limits agentproc.Limits
}{
	{"proc", agentproc.Limits{}},
	{"cgroup", agentproc.Limits{Memory: 1 << 30}},
}

func startForUsage(t *testing.T, m *agentproc.Manager, req agentproc.Request) *agentproc.Process {
	t.Helper()
	p, err := m.Start(testContext(t), req)
	if errors.Is(err, agentproc.ErrUnsupported) && req.Limits != (agentproc.Limits{}) {
		t.Skipf("no cgroup for Limits here: %v", err)
	}
	if err != nil {
		t.Fatalf("Start(%q): %v", req.Command, err)
	}
	return p
}

// waitUsage reads p's usage until ok accepts it, failing at the test's
// deadline with the last reading.
func waitUsage(t *testing.T, p *agentproc.Process, what string, ok func(agentproc.Usage) bool) agentproc.Usage {
	t.Helper()
	ctx := testContext(t)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		u, err := p.Usage(ctx)
		if err != nil {
			t.Fatalf("Usage: got %v, want nil", err)
		}
		if ok(u) {
			return u
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Usage: got %+v, want %s", u, what)
		case <-tick.C:
		}
	}
}

// statCPU is pid's own user and system time (without its children's).
func statCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	data := string(must(os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))))
	f := strings.Fields(data[strings.LastIndexByte(data, ')')+1:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// TestUsageCPUGrows: the CPU time of a tree of two busy processes grows
// between readings, and counts the member that is not the shell.
func TestUsageCPUGrows(t *testing.T) {
	t.Parallel()
	for _, mode := range usageModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t)
			p := startForUsage(t, m, agentproc.Request{
				Command: "while :; do :; done & while :; do :; done",
				Limits:  mode.limits,
			})
			first := waitUsage(t, p, "CPU above 0", func(u agentproc.Usage) bool { return u.CPU > 0 })
			waitUsage(t, p, fmt.Sprintf("CPU above %v", first.CPU+100*time.Millisecond), func(u agentproc.Usage) bool {
				return u.CPU > first.CPU+100*time.Millisecond
			})
			// The shell's own time, read after the tree's, is at least
			// what it was then: what is left is the background loop's.
			waitUsage(t, p, "100ms of CPU beyond the shell's own", func(u agentproc.Usage) bool {
				return u.CPU-statCPU(t, p.Info().PID) > 100*time.Millisecond
			})
			if u, err := p.Usage(testContext(t)); err != nil || u.Memory <= 0 {
				t.Errorf("Usage: got %+v, %v; want Memory above 0, nil", u, err)
			}
		})
	}
}

// TestUsageMemory: a child holding 64 MiB of touched memory reads as more
// than 50 MiB.
func TestUsageMemory(t *testing.T) {
	t.Parallel()
	for _, mode := range usageModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t)
			req := helperRequest(t, "alloc")
			req.Limits = mode.limits
			p := startForUsage(t, m, req)
			waitForOutput(t, p, regexp.MustCompile(`ready`))
			u, err := p.Usage(testContext(t))
			if err != nil {
				t.Fatalf("Usage: got %v, want nil", err)
			}
			if u.Memory < 50<<20 {
				t.Errorf("Usage.Memory: got %d (%.1f MiB), want above 50 MiB", u.Memory, float64(u.Memory)/(1<<20))
			}
		})
	}
}

// TestUsageExited: an exited process has no current usage; its final
// figures are in Info.
func TestUsageExited(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "true"})
	mustWait(t, p)
	if u, err := p.Usage(testContext(t)); !errors.Is(err, agentproc.ErrNotRunning) {
		t.Errorf("Usage after exit: got %+v, %v; want ErrNotRunning", u, err)
	}
	q := mustStart(t, m, agentproc.Request{Command: "exec sleep 1000"})
	if _, err := q.Usage(canceledContext()); !errors.Is(err, context.Canceled) {
		t.Errorf("Usage with a canceled context: got %v, want context.Canceled", err)
	}
}

// TestUsageScope: a Scope reads the usage of its owner's running processes
// in one call, each its own tree's, and none of another owner's or of an
// exited process.
func TestUsageScope(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	alice, bob := m.Scope("alice"), m.Scope("bob")
	exited := mustStart(t, alice, agentproc.Request{Command: "true"})
	mustWait(t, exited)
	sleeper := mustStart(t, alice, agentproc.Request{Command: "exec sleep 1000"})
	alloc := mustStart(t, alice, helperRequest(t, "alloc"))
	other := mustStart(t, bob, agentproc.Request{Command: "exec sleep 1000"})
	waitForOutput(t, alloc, regexp.MustCompile(`ready`))
	got, err := alice.Usage(testContext(t))
	if err != nil {
		t.Fatalf("Scope.Usage: got %v, want nil", err)
	}
	if len(got) != 2 {
		t.Errorf("Scope.Usage: got %d entries %v, want alice's 2 running processes (not %s, %s)", len(got), got, exited.ID(), other.ID())
	}
	if u := got[alloc.ID()]; u.Memory < 50<<20 {
		t.Errorf("Usage of the 64 MiB child: got %+v, want Memory above 50 MiB", u)
	}
	if u, ok := got[sleeper.ID()]; !ok || u.Memory <= 0 || u.Memory >= 50<<20 {
		t.Errorf("Usage of sleep: got %+v (present %v), want Memory above 0 and below 50 MiB (its own tree only)", u, ok)
	}
	if _, err := alice.Usage(canceledContext()); !errors.Is(err, context.Canceled) {
		t.Errorf("Scope.Usage with a canceled context: got %v, want context.Canceled", err)
	}
}
