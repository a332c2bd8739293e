package agentproc_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// These tests run the limits where the library finds the parent itself (no
// WithCgroup): on this project's hybrid machines in the cgroup v1
// hierarchies under the host's own cgroups, on a v2 host under the root
// cgroup or a delegated one. They skip only where the host has no cgroup
// the host process may create children in (not root, nothing delegated),
// saying so.

// treeCgroups maps each hierarchy the process pid is in to its directory:
// v1 controllers by name ("pids", "memory", "cpu", "cpuacct"), and "v2" for
// the cgroup v2 one. Only directories named agentproc-<id> are listed.
func treeCgroups(t *testing.T, pid int, id string) map[string]string {
	t.Helper()
	type mnt struct{ root, point string }
	mounts := map[string]mnt{} // controller (or "v2") -> mount
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(mi)))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if _, dup := mounts["v2"]; !dup {
				mounts["v2"] = mnt{f[3], f[4]}
			}
		case "cgroup":
			for _, c := range strings.Split(g[2], ",") {
				if _, dup := mounts[c]; !dup {
					mounts[c] = mnt{f[3], f[4]}
				}
			}
		}
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || !strings.HasSuffix(parts[2], "/agentproc-"+id) {
			continue
		}
		ctls := strings.Split(parts[1], ",")
		if parts[0] == "0" {
			ctls = []string{"v2"}
		}
		for _, c := range ctls {
			if m, ok := mounts[c]; ok {
				dirs[c] = filepath.Join(m.point, strings.TrimPrefix(parts[2], strings.TrimSuffix(m.root, "/")))
			}
		}
	}
	return dirs
}

// startDefault starts req with no WithCgroup and skips, with the reason,
// where no cgroup can be had for its limits.
func startDefault(t *testing.T, m *agentproc.Manager, req agentproc.Request) *agentproc.Process {
	t.Helper()
	p, err := m.Start(testContext(t), req)
	if err != nil {
		if os.Geteuid() != 0 && strings.Contains(err.Error(), "unsupported") {
			t.Skipf("no cgroup for %s here without root or delegation: %v", req.Limits, err)
		}
		t.Fatalf("Start(%q) with %s: %v", req.Command, req.Limits, err)
	}
	return p
}

// slowdown is how much slower than a native host this one starts and
// reaps a process: the median of five Start+Wait of true against 2 ms, at
// least 1. The time bounds of the limit tests are multiplied by it, so that
// under emulation (the QEMU VM of .ci/test-cgroup-vm.sh, where everything
// runs 10 to 50 times slower) they assert the behaviour rather than the
// emulator's speed; on a native host it is 1 and the bounds are as stated.
func slowdown(t *testing.T) float64 {
	t.Helper()
	m := newManager(t)
	var ds []time.Duration
	for range 5 {
		start := time.Now()
		mustWait(t, mustStart(t, m, agentproc.Request{Command: "true"}))
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	f := max(1, float64(ds[2])/float64(2*time.Millisecond))
	if f > 1 {
		t.Logf("this host runs %.1f times slower than a native one: time bounds are stretched by that", f)
	}
	return f
}

// scaled is d times slowdown.
func scaled(d time.Duration, slow float64) time.Duration {
	return time.Duration(float64(d) * slow)
}

// requireRemoved closes m, whose trees have finished, and checks that
// every cgroup directory of theirs is gone: a tree's cgroups are removed
// after its exit is published, and Close waits for that.
func requireRemoved(t *testing.T, m *agentproc.Manager, dirs map[string]string) {
	t.Helper()
	if err := m.Close(); err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
	for c, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s cgroup %s: got %v, want removed", c, dir, err)
		}
	}
}

// TestLimitsDefaultParent: with Limits and no WithCgroup the tree's cgroups
// are made directly under the host's own cgroup in each hierarchy, hold the
// limits, and are removed when the tree is gone.
func TestLimitsDefaultParent(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := startDefault(t, m, agentproc.Request{
		Command: "echo ready; read x",
		Stdin:   true,
		Limits:  agentproc.Limits{Memory: 256 << 20, Procs: 100, CPU: 1.5},
	})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	dirs := treeCgroups(t, p.Info().PID, p.ID())
	if len(dirs) == 0 {
		t.Fatalf("the shell is in no agentproc-%s cgroup", p.ID())
	}
	self := hostCgroups(t)
	for c, dir := range dirs {
		rel := strings.TrimSuffix(dir, "/agentproc-"+p.ID())
		if !strings.HasSuffix(rel, strings.TrimSuffix(self[c], "/")) {
			t.Errorf("%s cgroup %s: want it directly under the host's own cgroup %q", c, dir, self[c])
		}
	}
	pidsDir, memDir := dirs["pids"], dirs["memory"]
	if pidsDir == "" || memDir == "" {
		pidsDir, memDir = dirs["v2"], dirs["v2"]
	}
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(pidsDir, "pids.max"))))); got != "100" {
		t.Errorf("pids.max: got %q, want 100", got)
	}
	memFile := "memory.max"
	if dirs["memory"] != "" {
		memFile = "memory.limit_in_bytes"
	}
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(memDir, memFile))))); got != strconv.Itoa(256<<20) {
		t.Errorf("%s: got %q, want %d", memFile, got, 256<<20)
	}
	if _, err := p.WriteStdin(testContext(t), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
	requireRemoved(t, m, dirs)
	t.Logf("cgroups: %v", dirs)
}

// hostCgroups is the test process's own cgroup per hierarchy, as
// /proc/self/cgroup names it ("v2" for the unified one), with any
// agentproc-* element a placement in flight may show cut off.
func hostCgroups(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := parts[2]
		if i := strings.Index(path, "/agentproc-"); i >= 0 {
			path = path[:i]
		}
		if parts[0] == "0" {
			out["v2"] = path
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = path
		}
	}
	return out
}

// TestLimitsForkBombDefault runs a fork bomb under Procs 64 in the default
// parent: the tree never has more than 64 tasks, a plain command starts
// and ends meanwhile, and Stop ends all of it. Not parallel: the bomb
// takes every CPU it can get.
func TestLimitsForkBombDefault(t *testing.T) {
	slow := slowdown(t)
	m := newManager(t, agentproc.WithGracePeriod(time.Second))
	ctx := testContext(t)
	p := startDefault(t, m, agentproc.Request{
		Command: `f() { f | f & }; f 2>/dev/null; exec sleep 1000`,
		Limits:  agentproc.Limits{Procs: 64},
	})
	dirs := treeCgroups(t, p.Info().PID, p.ID())
	cg := dirs["pids"]
	if cg == "" {
		cg = dirs["v2"]
	}
	if cg == "" {
		t.Fatalf("the shell is in no pids cgroup of its own (%v)", dirs)
	}
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(cg, "pids.max"))))); got != "64" {
		t.Fatalf("pids.max: got %q, want 64", got)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	peak := int64(0)
	sample := func() { peak = max(peak, cgroupValue(t, filepath.Join(cg, "pids.current"), "")) }
	for cgroupValue(t, filepath.Join(cg, "pids.events"), "max") == 0 {
		sample()
		select {
		case <-ctx.Done():
			t.Fatalf("the fork bomb never reached pids.max (pids.current %d)", peak)
		case <-tick.C:
		}
	}
	// The host is still responsive: a plain command starts and ends while
	// the bomb is sampled.
	other := newManager(t)
	var wg sync.WaitGroup
	var during time.Duration
	wg.Go(func() {
		start := time.Now()
		mustWait(t, mustStart(t, other, agentproc.Request{Command: "true"}))
		during = time.Since(start)
	})
	for range 200 {
		sample()
	}
	wg.Wait()
	if during > scaled(time.Second, slow) {
		t.Errorf("Start+Wait of true during the bomb took %s, want under %s", during, scaled(time.Second, slow))
	}
	requirePidsPeak(t, peak, 64)
	info, err := p.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Running {
		t.Errorf("Stop: got %+v, want exited", info)
	}
	requireNoMarked(t, p.ID())
	requireRemoved(t, m, dirs)
	t.Logf("fork bomb: peak %d tasks under pids.max 64 (%s); Start+Wait of true meanwhile: %s", peak, cg, during)
}

// TestLimitsMemoryOOMDefault runs a 1 GiB hog beside a sleeping sibling
// under Memory 64 MiB in the default parent: the OOM killer ends the hog,
// the whole tree is gone within 5 s (on cgroup v1, which has no
// memory.oom.group, by the library's OOM watch), the reason is ReasonOOM,
// the peak is reported, and the host is not the victim.
func TestLimitsMemoryOOMDefault(t *testing.T) {
	t.Parallel()
	hog := agentproc.UseHelper("hog")
	slow := slowdown(t)
	m := newManager(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The shell waits for a line before it starts the hog: its cgroups are
	// read from /proc while it is there to read. Started at once, the hog
	// could be killed, and the shell with it, and reaped before a test
	// goroutine slowed by load got to the read.
	p := startDefault(t, m, agentproc.Request{
		Command: `read go; sleep 1000 & ` + shellQuote(exe) + `; echo survived; wait`,
		Stdin:   true,
		Env:     map[string]string{agentproc.HelperEnv: hog},
		Limits:  agentproc.Limits{Memory: 64 << 20},
	})
	dirs := treeCgroups(t, p.Info().PID, p.ID())
	start := time.Now()
	if _, err := p.WriteStdin(testContext(t), []byte("go\n")); err != nil {
		t.Fatalf("WriteStdin: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scaled(5*time.Second, slow))
	defer cancel()
	info, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("the tree did not end within %s under a 64 MiB limit: %v (output %q)", scaled(5*time.Second, slow), err, p.Output().Text)
	}
	took := time.Since(start)
	if info.Reason != agentproc.ReasonOOM {
		t.Errorf("reason: got %q, want %q (output %q)", info.Reason, agentproc.ReasonOOM, p.Output().Text)
	}
	if strings.Contains(p.Output().Text, "survived") {
		t.Error("the shell ran on after the OOM kill: the whole tree should end")
	}
	if info.MaxRSS <= 0 || info.MaxRSS > 64<<20+64<<10 {
		t.Errorf("peak memory: got %d, want above 0 and at most 64 MiB (plus a few pages)", info.MaxRSS)
	}
	requireNoMarked(t, p.ID())
	requireRemoved(t, m, dirs)
	// The host was not the victim: it is here, and its own cgroup is not
	// the one that counted a kill.
	t.Logf("memory hog: reason %s, peak %s, tree gone %s after the hog's start (%v)", info.Reason, fmtMiB(info.MaxRSS), took, dirs)
}

// TestLimitsCPUShareDefault measures a busy loop under CPU 0.25 over 2 s in
// the default parent, from the tree's own CPU accounting.
func TestLimitsCPUShareDefault(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := startDefault(t, m, agentproc.Request{
		Command: `echo spinning; while :; do :; done`,
		Limits:  agentproc.Limits{CPU: 0.25},
	})
	waitForOutput(t, p, regexp.MustCompile(`spinning`))
	dirs := treeCgroups(t, p.Info().PID, p.ID())
	usage := func() int64 { // microseconds
		switch {
		case dirs["v2"] != "":
			return cgroupValue(t, filepath.Join(dirs["v2"], "cpu.stat"), "usage_usec")
		case dirs["cpuacct"] != "":
			return cgroupValue(t, filepath.Join(dirs["cpuacct"], "cpuacct.usage"), "") / 1000
		}
		t.Fatalf("no CPU accounting for the tree (%v)", dirs)
		return 0
	}
	if cpu := dirs["cpu"]; cpu != "" {
		if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(cpu, "cpu.cfs_quota_us"))))); got != "25000" {
			t.Fatalf("cpu.cfs_quota_us: got %q, want 25000", got)
		}
	}
	requireCPUShare(t, 0.25, 0.35, usage)
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
	requireRemoved(t, m, dirs)
}

// TestLimitsBornInside starts, 200 times, four at once, a command whose
// first act is to fork: every descendant must be in the tree's cgroups in
// every hierarchy, which thread placement (v1) and CLONE_INTO_CGROUP (v2)
// guarantee and writing the PID after the start does not.
func TestLimitsBornInside(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	limits := agentproc.Limits{Memory: 512 << 20, Procs: 1000, CPU: 2}
	// Skips here, before the loop, where no cgroup can be had.
	mustWait(t, startDefault(t, m, agentproc.Request{Command: "true", Limits: limits}))
	const runs, workers = 200, 4
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	escapes := 0
	for range workers {
		wg.Go(func() {
			for range jobs {
				p, err := m.Start(testContext(t), agentproc.Request{
					Command: `(cat /proc/self/cgroup) & wait`,
					Limits:  limits,
				})
				if err != nil {
					t.Error(err)
					continue
				}
				info, err := p.Wait(testContext(t))
				if err != nil || info.ExitCode == nil || *info.ExitCode != 0 {
					t.Errorf("Wait: %+v, %v", info, err)
					continue
				}
				for line := range strings.Lines(p.Output().Text) {
					parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
					if len(parts) != 3 || !wantedHierarchy(parts) {
						continue
					}
					if !strings.HasSuffix(parts[2], "/agentproc-"+p.ID()) {
						mu.Lock()
						escapes++
						mu.Unlock()
						t.Errorf("a grandchild was born outside the tree's cgroups: %q", line)
					}
				}
			}
		})
	}
	for i := range runs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("%d runs: %d grandchildren born outside", runs, escapes)
}

// wantedHierarchy reports whether a /proc/PID/cgroup line names a hierarchy
// a tree with memory, pids and CPU limits is put in.
func wantedHierarchy(parts []string) bool {
	if parts[0] == "0" {
		return true // on a hybrid host the controller-less v2 cgroup too
	}
	for _, c := range strings.Split(parts[1], ",") {
		if c == "pids" || c == "memory" || c == "cpu" {
			return true
		}
	}
	return false
}
