package agentproc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// These tests run the limits where agents really run: a host in a cgroup v2
// that is not the root and holds it (a service, a container), with no
// WithCgroup. Each starts a helper host ("where-host") in a cgroup the test
// makes, and the helper runs a bounded fork bomb, a memory hog and a CPU
// share under the default parent the library finds, then reports. They
// need root and a cgroup v2 hierarchy with the memory, pids and cpu
// controllers: the QEMU VM of make test-cgroup-vm (on this project's
// hybrid machines those controllers are bound to cgroup v1, and the tests
// skip saying so).

const (
	// whereSlowEnv passes the test's slowdown factor to the helper host.
	whereSlowEnv = "AGENTPROC_TEST_WHERE_SLOW"
	// whereMountEnv makes the helper host mount a cgroup2 of its own at
	// /sys/fs/cgroup first (in its own mount and cgroup namespaces).
	whereMountEnv = "AGENTPROC_TEST_WHERE_MOUNT"
	// whereParentEnv names the parent the helper host's Manager is given
	// with WithCgroup; unset, it has none.
	whereParentEnv = "AGENTPROC_TEST_WHERE_PARENT"
)

func init() {
	agentproc.RegisterHelper("where-host", runWhereHost, false)
}

// runWhereHost is the helper host. It prints, each on a line, with cgroup
// paths as its own /proc/self/cgroup names them:
//
//	bomb PEAK TREE       the fork bomb's most tasks and its cgroup
//	hog REASON PEAK SURVIVED TREE
//	cpu SHARE FREE TREE  the capped loop's share and an uncapped one's
//	set DIR              a cgroup of a set the Manager's pool made ahead
//	host CGROUP          where the host ended
//	left DIR             a tree's or a set's cgroup still there after Close
//
// and "ready"; "fail ..." on a failure.
func runWhereHost() int {
	slow, _ := strconv.ParseFloat(os.Getenv(whereSlowEnv), 64)
	slow = max(slow, 1)
	fail := func(format string, args ...any) int {
		fmt.Printf("fail "+format+"\n", args...)
		fmt.Println("ready")
		return 1
	}
	if os.Getenv(whereMountEnv) != "" {
		// The hierarchy's mount the host inherited goes first, as in a
		// container, which sees only its own (a second mount of the same
		// hierarchy on the same point is refused).
		if err := unix.Unmount("/sys/fs/cgroup", unix.MNT_DETACH); err != nil {
			return fail("unmount the inherited cgroup2: %v", err)
		}
		if err := unix.Mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, ""); err != nil {
			return fail("mount cgroup2: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), scaled(60*time.Second, slow))
	defer cancel()
	opts := []agentproc.Option{agentproc.WithGracePeriod(time.Second)}
	if parent := os.Getenv(whereParentEnv); parent != "" {
		opts = append(opts, agentproc.WithCgroup(parent))
	}
	m := agentproc.New(opts...)
	var dirs []string
	treeOf := func(p *agentproc.Process) string {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Info().PID))
		rel := strings.TrimSpace(strings.TrimPrefix(string(data), "0::"))
		dirs = append(dirs, "/sys/fs/cgroup"+rel)
		return rel
	}
	read := func(file, key string) int64 {
		data, _ := os.ReadFile(file)
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if key == "" && len(f) == 1 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
			if len(f) == 2 && f[0] == key {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
		return 0
	}

	// The fork bomb, sampled until pids.max has refused forks and 200
	// times more.
	p, err := m.Start(ctx, agentproc.Request{Command: `f() { f | f & }; f 2>/dev/null; exec sleep 1000`, Limits: agentproc.Limits{Procs: 64}})
	if err != nil {
		return fail("bomb: %v", err)
	}
	bomb := treeOf(p)
	cg := "/sys/fs/cgroup" + bomb
	peak := int64(0)
	for i := 0; i < 200; {
		peak = max(peak, read(cg+"/pids.current", ""))
		if read(cg+"/pids.events", "max") > 0 {
			i++
		}
		if ctx.Err() != nil {
			return fail("bomb: pids.max never refused a fork (peak %d)", peak)
		}
	}
	if _, err := p.Stop(ctx); err != nil {
		return fail("bomb: stop: %v", err)
	}
	fmt.Println("bomb", peak, bomb)

	// The memory hog beside a sleeping sibling.
	exe, _ := os.Executable()
	p, err = m.Start(ctx, agentproc.Request{
		Command: `sleep 1000 & ` + shellQuote(exe) + `; echo survived; wait`,
		Env:     map[string]string{agentproc.HelperEnv: agentproc.UseHelper("hog")},
		Limits:  agentproc.Limits{Memory: 64 << 20},
	})
	if err != nil {
		return fail("hog: %v", err)
	}
	hog := treeOf(p)
	hctx, hcancel := context.WithTimeout(ctx, scaled(5*time.Second, slow))
	info, err := p.Wait(hctx)
	hcancel()
	if err != nil {
		return fail("hog: the tree did not end within %s: %v", scaled(5*time.Second, slow), err)
	}
	fmt.Println("hog", info.Reason, info.MaxRSS, strings.Contains(p.Output().Text, "survived"), hog)

	// The CPU share, against an uncapped loop beside it (requireCPUShare's
	// measure).
	p, err = m.Start(ctx, agentproc.Request{Command: `echo spinning; while :; do :; done`, Limits: agentproc.Limits{CPU: 0.25}})
	if err != nil {
		return fail("cpu: %v", err)
	}
	cpu := treeOf(p)
	for next := int64(0); !strings.Contains(p.Output().Text, "spinning"); {
		c, err := p.WaitOutput(ctx, next)
		if err != nil || c.EOF {
			return fail("cpu: no output: %v", err)
		}
		next = c.Next
	}
	spin := exec.Command("sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		return fail("cpu: %v", err)
	}
	onCPU := func() int64 {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", spin.Process.Pid))
		n, _ := strconv.ParseInt(strings.Fields(string(data) + " 0")[0], 10, 64)
		return n
	}
	u0, s0, t0 := read("/sys/fs/cgroup"+cpu+"/cpu.stat", "usage_usec"), onCPU(), time.Now()
	// Not synchronisation: this is the measurement window itself.
	<-time.After(2 * time.Second)
	u1, s1, t1 := read("/sys/fs/cgroup"+cpu+"/cpu.stat", "usage_usec"), onCPU(), time.Now()
	_ = spin.Process.Kill()
	_ = spin.Wait()
	elapsed := float64(t1.Sub(t0).Microseconds())
	if _, err := p.Stop(ctx); err != nil {
		return fail("cpu: stop: %v", err)
	}
	fmt.Printf("cpu %.3f %.3f %s\n", float64(u1-u0)/elapsed, float64(s1-s0)/1000/elapsed, cpu)

	sets, err := agentproc.ReadyCgroupSetDirs(ctx, m, 2)
	if err != nil {
		return fail("ready sets: %v", err)
	}
	for _, d := range sets {
		fmt.Println("set", strings.TrimPrefix(d, "/sys/fs/cgroup"))
	}
	if err := m.Close(); err != nil {
		return fail("close: %v", err)
	}
	for _, d := range append(dirs, sets...) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			fmt.Println("left", d)
		}
	}
	data, _ := os.ReadFile("/proc/self/cgroup")
	fmt.Println("host", strings.TrimSpace(strings.TrimPrefix(string(data), "0::")))
	fmt.Println("ready")
	return 0
}

// whereResult is what runWhereHost reported.
type whereResult struct {
	bombPeak       int64
	bomb, hog, cpu string // the trees' cgroups, as the host saw them
	hogReason      agentproc.ExitReason
	hogPeak        int64
	hogSurvived    bool
	cpuShare, free float64
	sets, left     []string
	host           string
}

// cgroupV2Root returns the cgroup v2 root of this host with the memory,
// pids and cpu controllers enabled for its children, or skips.
func cgroupV2Root(t *testing.T) string {
	t.Helper()
	// Before the skips: the mode is these tests' either way (they run in
	// make test-cgroup-vm and skip on a host bound to cgroup v1).
	agentproc.UseHelper("where-host")
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test makes cgroups and moves a host between them")
	}
	self := string(must(os.ReadFile("/proc/self/cgroup")))
	mounts := testCgroup2Mounts()
	if len(mounts) == 0 || !strings.Contains(self, "0::/\n") {
		t.Skip("needs the test in the root cgroup of a cgroup v2 hierarchy")
	}
	root := mounts[0]
	ctls := readCgroupList(t, filepath.Join(root, "cgroup.controllers"))
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !ctls[c] {
			t.Skipf("the cgroup v2 hierarchy at %s has no %s controller (it is bound to cgroup v1 here): make test-cgroup-vm runs this test", root, c)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0); err != nil {
		t.Fatalf("enable the controllers in %s: %v", root, err)
	}
	return root
}

// testCgroup makes dir/agentproc-test-<name>-<random> and removes it, and
// the agentproc-host leaf a host made in it, when the test ends (after the
// helper host, whose cleanup is registered later, has exited).
func testCgroup(t *testing.T, dir, name string) string {
	t.Helper()
	cg := filepath.Join(dir, "agentproc-test-"+name+"-"+uuid.NewString()[:8])
	if err := agentproc.MakeTestCgroup(t, cg, filepath.Join(cg, "agentproc-host")); err != nil {
		t.Fatal(err)
	}
	return cg
}

// runWhere runs the helper host in the cgroup cg with attr and env, and
// returns what it reported once it has exited.
func runWhere(t *testing.T, cg string, attr *syscall.SysProcAttr, env ...string) whereResult {
	t.Helper()
	mode := agentproc.UseHelper("where-host")
	slow := slowdown(t)
	fd, err := unix.Open(cg, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	attr.UseCgroupFD, attr.CgroupFD = true, fd
	// The helper reports once it is done, and under emulation that takes
	// long: its own deadline, stretched by the slowdown, bounds the wait.
	ctx, cancel := context.WithTimeout(context.Background(), scaled(90*time.Second, slow))
	defer cancel()
	host := exec.CommandContext(ctx, os.Args[0])
	host.SysProcAttr = attr
	host.Env = append(append(os.Environ(), agentproc.HelperEnv+"="+mode, fmt.Sprintf("%s=%g", whereSlowEnv, slow)), env...)
	host.Stderr = os.Stderr
	out, err := host.Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil {
		// Whatever the host left running in the test's cgroup goes with it.
		_ = os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0)
		t.Fatalf("the helper host failed: %v (it printed %q)", err, lines)
	}
	if len(lines) > 0 && lines[len(lines)-1] == "ready" {
		lines = lines[:len(lines)-1]
	}
	var r whereResult
	for _, line := range lines {
		f := strings.Fields(line)
		switch {
		case f[0] == "fail":
			t.Fatalf("helper host: %s", line)
		case f[0] == "bomb" && len(f) == 3:
			r.bombPeak, r.bomb = must(strconv.ParseInt(f[1], 10, 64)), f[2]
		case f[0] == "hog" && len(f) == 5:
			r.hogReason, r.hogPeak, r.hogSurvived, r.hog = agentproc.ExitReason(f[1]), must(strconv.ParseInt(f[2], 10, 64)), f[3] == "true", f[4]
		case f[0] == "cpu" && len(f) == 4:
			r.cpuShare, r.free, r.cpu = must(strconv.ParseFloat(f[1], 64)), must(strconv.ParseFloat(f[2], 64)), f[3]
		case f[0] == "set" && len(f) == 2:
			r.sets = append(r.sets, f[1])
		case f[0] == "left" && len(f) == 2:
			r.left = append(r.left, f[1])
		case f[0] == "host" && len(f) == 2:
			r.host = f[1]
		default:
			t.Fatalf("helper host printed %q", line)
		}
	}
	t.Logf("helper host in %s: %+v", cg, r)
	return r
}

// requireWhere checks what every one of these tests wants of the helper's
// report: the bomb held at 64 tasks, the hog ended by the OOM killer with
// the whole tree, the loop held near a quarter of a core, every tree in
// its own cgroup under the parent wanted, and none left. outside maps a
// cgroup path the helper named to its directory here.
func requireWhere(t *testing.T, r whereResult, wantParent map[string]string, outside func(string) string) {
	t.Helper()
	requirePidsPeak(t, r.bombPeak, 64)
	if r.hogReason != agentproc.ReasonOOM {
		t.Errorf("hog reason: got %q, want %q", r.hogReason, agentproc.ReasonOOM)
	}
	if r.hogSurvived {
		t.Error("the hog's shell ran on after the OOM kill: the whole tree should end")
	}
	if r.hogPeak <= 0 || r.hogPeak > 64<<20+64<<10 {
		t.Errorf("hog peak memory: got %d, want above 0 and at most 64 MiB (plus a few pages)", r.hogPeak)
	}
	if lower := min(0.6*0.25, r.free/2); r.cpuShare > 0.35 || r.cpuShare < lower {
		t.Errorf("CPU share: got %.3f, want 0.25 (at most 0.35, at least %.3f)", r.cpuShare, lower)
	}
	for name, tree := range map[string]string{"bomb": r.bomb, "hog": r.hog, "cpu": r.cpu} {
		if got, want := filepath.Dir(tree), wantParent[name]; got != want || !strings.HasPrefix(filepath.Base(tree), "agentproc-") {
			t.Errorf("%s tree in cgroup %s: got parent %s, want an agentproc-<id> cgroup under %s", name, tree, got, want)
		}
	}
	if len(r.sets) == 0 {
		t.Error("the host reported no ready set's cgroup: want the two made ahead, to see them removed")
	}
	if len(r.left) > 0 {
		t.Errorf("cgroups left after Close, as the host saw them: %v, want none", r.left)
	}
	for _, d := range append([]string{r.bomb, r.hog, r.cpu}, r.sets...) {
		if _, err := os.Stat(outside(d)); !os.IsNotExist(err) {
			t.Errorf("cgroup %s: got %v, want removed", outside(d), err)
		}
	}
}

// TestLimitsDefaultParentOccupied: a host alone in a non-root cgroup v2
// that offers every controller (a service's cgroup) gets its limits with
// no WithCgroup: it moves itself into <own>/agentproc-host and makes the
// trees in <own>.
func TestLimitsDefaultParentOccupied(t *testing.T) {
	root := cgroupV2Root(t)
	cg := testCgroup(t, root, "occupied")
	rel := strings.TrimPrefix(cg, root)
	r := runWhere(t, cg, &syscall.SysProcAttr{})
	if want := rel + "/agentproc-host"; r.host != want {
		t.Errorf("host cgroup: got %s, want %s", r.host, want)
	}
	requireWhere(t, r, map[string]string{"bomb": rel, "hog": rel, "cpu": rel},
		func(d string) string { return filepath.Join(root, d) })
	requireNoTrees(t, cg)
}

// TestLimitsNamedParentKeepsHost: naming a parent with WithCgroup opts
// out of the default parent's move (docs/limits.md, "Which parent"): a
// host alone in a non-root cgroup v2 that offers every controller, which
// without WithCgroup moves itself into <own>/agentproc-host
// (TestLimitsDefaultParentOccupied), stays where it is, and its trees go
// under the parent named.
func TestLimitsNamedParentKeepsHost(t *testing.T) {
	root := cgroupV2Root(t)
	cg := testCgroup(t, root, "keep")
	parent := testCgroup(t, root, "named")
	rel, relParent := strings.TrimPrefix(cg, root), strings.TrimPrefix(parent, root)
	r := runWhere(t, cg, &syscall.SysProcAttr{}, whereParentEnv+"="+parent)
	if r.host != rel {
		t.Errorf("host cgroup: got %s, want %s (not moved)", r.host, rel)
	}
	requireWhere(t, r, map[string]string{"bomb": relParent, "hog": relParent, "cpu": relParent},
		func(d string) string { return filepath.Join(root, d) })
	requireNoTrees(t, cg)
	requireNoTrees(t, parent)
}

// TestLimitsDefaultParentMemoryOnly: a root host whose cgroup offers only
// the memory controller (its parent enables nothing else) puts the trees
// that need pids or cpu at the top of the hierarchy, and the memory hog
// in its own cgroup after moving itself out of it.
func TestLimitsDefaultParentMemoryOnly(t *testing.T) {
	root := cgroupV2Root(t)
	parent := testCgroup(t, root, "memonly")
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
		t.Fatal(err)
	}
	cg := testCgroup(t, parent, "host")
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(cg, "cgroup.controllers"))))); got != "memory" {
		t.Fatalf("%s cgroup.controllers: got %q, want memory", cg, got)
	}
	rel := strings.TrimPrefix(cg, root)
	r := runWhere(t, cg, &syscall.SysProcAttr{})
	if want := rel + "/agentproc-host"; r.host != want {
		t.Errorf("host cgroup: got %s, want %s", r.host, want)
	}
	requireWhere(t, r, map[string]string{"bomb": "/", "hog": rel, "cpu": "/"},
		func(d string) string { return filepath.Join(root, d) })
	requireNoTrees(t, parent)
}

// TestLimitsInCgroupNamespace plays a container: the helper host runs in
// a cgroup namespace of its own whose root is a non-root cgroup holding
// the host alone, with a cgroup2 of its own mounted at /sys/fs/cgroup (as
// a container runtime does). /proc/self/cgroup says "0::/" there, yet the
// cgroup is no root: the host moves itself into /agentproc-host and the
// trees go into the namespace's root.
func TestLimitsInCgroupNamespace(t *testing.T) {
	root := cgroupV2Root(t)
	cg := testCgroup(t, root, "ns")
	r := runWhere(t, cg, &syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWCGROUP | unix.CLONE_NEWNS}, whereMountEnv+"=1")
	if r.host != "/agentproc-host" {
		t.Errorf("host cgroup in its namespace: got %s, want /agentproc-host", r.host)
	}
	requireWhere(t, r, map[string]string{"bomb": "/", "hog": "/", "cpu": "/"},
		func(d string) string { return filepath.Join(cg, d) })
	requireNoTrees(t, cg)
}

// requireNoTrees checks that no tree's cgroup (agentproc-<uuid>) is left
// anywhere under dir, as .ci/check-cgroups.sh does for the whole host.
func requireNoTrees(t *testing.T, dir string) {
	t.Helper()
	treeName := regexp.MustCompile(`^agentproc-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && treeName.MatchString(d.Name()) {
			t.Errorf("cgroup %s: got left behind, want removed", path)
		}
		return nil
	})
}
