package agentproc_test

import (
	"context"
	"errors"
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

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
	"github.com/google/uuid"
)

// TestLimitsNamedV1Parent names a parent in one cgroup v1 hierarchy, as
// runc's cgroupsPath does: the same relative path is used, and created,
// in every v1 hierarchy the limits need, and the tree's cgroups sit in it.
// It skips where no cgroup v1 pids hierarchy can be written.
func TestLimitsNamedV1Parent(t *testing.T) {
	t.Parallel()
	var pidsRoot, memRoot string
	for line := range strings.Lines(string(must(os.ReadFile("/proc/self/mountinfo")))) {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" || f[3] != "/" {
			continue
		}
		for _, c := range strings.Split(g[2], ",") {
			switch c {
			case "pids":
				pidsRoot = f[4]
			case "memory":
				memRoot = f[4]
			}
		}
	}
	if pidsRoot == "" || memRoot == "" {
		t.Skip("no cgroup v1 pids and memory hierarchies mounted at their roots")
	}
	rel := "agentproc-test-" + uuid.NewString()[:8]
	parent := filepath.Join(pidsRoot, rel)
	memParent := filepath.Join(memRoot, rel)
	// The library creates the named path in the other hierarchies and, as
	// runc does, leaves it: it is the operator's.
	if err := agentproc.MakeTestCgroup(t, parent, memParent); err != nil {
		t.Skipf("cannot make a cgroup in %s: %v", pidsRoot, err)
	}
	m := newManager(t, agentproc.WithCgroup(parent))
	p := mustStart(t, m, agentproc.Request{
		Command: "echo ready; read x",
		Stdin:   true,
		Limits:  agentproc.Limits{Memory: 128 << 20, Procs: 10},
	})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	dirs := treeCgroups(t, p.Info().PID, p.ID())
	leaf := "agentproc-" + p.ID()
	if dirs["pids"] != filepath.Join(parent, leaf) || dirs["memory"] != filepath.Join(memParent, leaf) {
		t.Errorf("cgroups: got %v, want pids and memory under %s", dirs, rel)
	}
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(parent, leaf, "pids.max"))))); got != "10" {
		t.Errorf("pids.max: got %q, want 10", got)
	}
	if _, err := p.WriteStdin(testContext(t), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
	requireRemoved(t, m, dirs)
}

// TestLimitsWithSandbox: a sandboxed start and cgroup v1 thread placement
// share one locked thread (startCommand): the shell is confined and born in
// the tree's cgroups, with the process limit lowered to the limit after
// the placement, which wrote through descriptors opened before Landlock.
func TestLimitsWithSandbox(t *testing.T) {
	requireSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	p := startDefault(t, m, agentproc.Request{
		WorkDir: ws,
		Command: "echo ready; read x",
		Stdin:   true,
		Limits:  agentproc.Limits{Memory: 128 << 20, Procs: 10},
	})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	dirs := treeCgroups(t, p.Info().PID, p.ID())
	pidsDir := dirs["pids"]
	if pidsDir == "" {
		pidsDir = dirs["v2"]
	}
	if pidsDir == "" {
		t.Fatalf("the sandboxed shell is in no pids cgroup of its own: %v", dirs)
	}
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(pidsDir, "pids.max"))))); got != "10" {
		t.Errorf("pids.max: got %q, want 10", got)
	}
	if _, err := p.WriteStdin(testContext(t), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if info := mustWait(t, p); info.Sandbox == nil {
		t.Errorf("Info.Sandbox: got nil, want the sandbox reported")
	}
	requireRemoved(t, m, dirs)
}

func init() {
	agentproc.RegisterHelper("host-v1-limits", runV1LimitsHost, false)
}

// runV1LimitsHost is a host on a pure cgroup v1 host: started in a mount
// namespace of its own, it unmounts every cgroup2 mount there, then starts
// a tree with a process limit on a state dir (hostDirEnv), prints "pids A
// B ID" for it and "ready", and blocks until killed.
func runV1LimitsHost() int {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 1
	}
	for line := range strings.Lines(string(mi)) {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			if err := unix.Unmount(f[4], unix.MNT_DETACH); err != nil {
				fmt.Fprintln(os.Stderr, "host: unmount", f[4]+":", err)
				return 1
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	m := agentproc.New(agentproc.WithStateDir(filepath.Join(os.Getenv(hostDirEnv), "a")))
	p, line := hostStart(ctx, m, agentproc.Request{Command: `sleep 300 & echo "pids $$ $!"; wait`, Limits: agentproc.Limits{Procs: 10}})
	if p == nil {
		return 1
	}
	fmt.Println(strings.TrimSpace(line), p.ID())
	fmt.Println("ready")
	select {} // until the test SIGKILLs this host
}

// TestHostDeathRemovesV1Cgroups: on a pure cgroup v1 host (this one,
// without its cgroup2 mount, in a mount namespace of the host's own) a
// host with a limited tree is SIGKILLed; its guard kills the tree and
// removes the tree's v1 cgroups, which its record names by the first of
// them (orphanCgroup, cgroup.OpenV1).
func TestHostDeathRemovesV1Cgroups(t *testing.T) {
	t.Parallel()
	mode := agentproc.UseHelper("host-v1-limits")
	if os.Geteuid() != 0 {
		t.Skip("needs root: a mount namespace, and the v1 hierarchies")
	}
	if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err != nil {
		t.Skip("no cgroup v1 pids hierarchy at /sys/fs/cgroup/pids")
	}
	host, pids, ids := startHostWith(t, mode, &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}, hostDirEnv+"="+t.TempDir())
	if len(ids) != 1 {
		t.Fatalf("host started %d processes, want 1", len(ids))
	}
	dirs := treeCgroups(t, pids[0], ids[0])
	if dirs["pids"] == "" {
		t.Fatalf("the tree is in no pids cgroup of its own: %v", dirs)
	}
	if dirs["v2"] != "" {
		t.Fatalf("the tree has a v2 cgroup %s: the host saw cgroup2", dirs["v2"])
	}
	fds := pinPIDs(t, pids)
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if left := waitExited(fds, 5*time.Second); left != 0 {
		t.Fatalf("%d of %d processes alive 5 s after the host was SIGKILLed, want 0", left, len(fds))
	}
	for c, dir := range dirs {
		requireGuardRemoved(t, c, dir)
	}
	t.Logf("v1 cgroups of the dead host's tree removed: %v", dirs)
}

func init() {
	agentproc.RegisterHelper("host-ready-sets", runReadySetsHost, false)
}

// runReadySetsHost runs two limited commands one after the other on a state
// dir (hostDirEnv), which leaves two cgroup sets made ahead in the
// Manager's pool, prints "set DIR" for each of their directories and "ready", and
// blocks until killed. It prints "unsupported: ..." and exits where limits
// cannot be held.
func runReadySetsHost() int {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	m := agentproc.New(agentproc.WithStateDir(filepath.Join(os.Getenv(hostDirEnv), "a")))
	if ok, code := hostRunLimited(ctx, m, 2, agentproc.Limits{Procs: 10}); !ok {
		if code == 0 {
			fmt.Println("ready")
		}
		return code
	}
	dirs, err := agentproc.ReadyCgroupSetDirs(ctx, m, 2)
	if err != nil {
		fmt.Fprintln(os.Stderr, "host: ready cgroup sets:", err)
		return 1
	}
	hostListAndBlock("set", dirs)
	return 0
}

// hostListAndBlock prints "what DIR" for each of dirs and "ready", and
// blocks until the test SIGKILLs this host.
func hostListAndBlock(what string, dirs []string) {
	for _, d := range dirs {
		fmt.Println(what, d)
	}
	fmt.Println("ready")
	select {}
}

// TestHostDeathRemovesReadyCgroupSets: a host with a state dir is SIGKILLed
// while its Manager's pool holds cgroup sets made ahead for the next
// limited Starts; its guard removes them, as it removes a live tree's.
func TestHostDeathRemovesReadyCgroupSets(t *testing.T) {
	t.Parallel()
	host, lines := runHost(t, agentproc.UseHelper("host-ready-sets"), nil, hostDirEnv+"="+t.TempDir())
	dirs := killHostRequireCgroupsRemoved(t, host, lines, "set", 2)
	t.Logf("the dead host's ready cgroup sets removed: %v", dirs)
}

// killHostRequireCgroupsRemoved reads the "<what> DIR" lines the host
// printed before "ready" (skipping the test where it printed
// "unsupported: ..."), checks that there are at least least of them and
// that each directory is there, then SIGKILLs the host and requires its
// guard to remove every one. It returns the directories.
func killHostRequireCgroupsRemoved(t *testing.T, host *exec.Cmd, lines []string, what string, least int) []string {
	t.Helper()
	var dirs []string
	for _, line := range lines {
		if reason, ok := strings.CutPrefix(line, "unsupported: "); ok {
			t.Skip("limits cannot be held here:", reason)
		}
		dir, ok := strings.CutPrefix(line, what+" ")
		if !ok {
			t.Fatalf("host printed %q", line)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("%s cgroup: %v", what, err)
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) < least {
		t.Fatalf("the host listed %s cgroups %v, want at least %d", what, dirs, least)
	}
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		requireGuardRemoved(t, what, dir)
	}
	return dirs
}

// requireGuardRemoved waits up to 10 s for the dead host's guard to remove
// the cgroup dir (what names it), and removes it itself if the guard does
// not (it is empty by then).
func requireGuardRemoved(t *testing.T, what, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s cgroup %s still there 10 s after the host died, want removed by its guard", what, dir)
			_ = os.Remove(dir)
			return
		}
		<-tick.C
	}
}

func init() {
	agentproc.RegisterHelper("limits-from-main", runLimitsFromMain, false)
}

// runLimitsFromMain starts limited commands one after the other from the
// main goroutine, on the main thread (GOMAXPROCS=1, so a goroutine it
// starts and waits for runs on the main thread too), and prints
// "placements N M" (the thread placements, those of the main thread) and
// "ready"; "unsupported: ..." where the limits cannot be held or need no
// placement (cgroup v2 alone).
func runLimitsFromMain() int {
	if unix.Gettid() != unix.Getpid() {
		fmt.Println("unsupported: the helper's main goroutine is not on the main thread")
		fmt.Println("ready")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	m := agentproc.New()
	ok, code := hostRunLimited(ctx, m, 20, agentproc.Limits{Memory: 64 << 20, Procs: 10})
	all, onMain := agentproc.Placements()
	// Closed before "ready": the test kills this process once it has read
	// it, and a Close cut short would leave the ready cgroup sets behind.
	if err := m.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "host: close:", err)
		return 1
	}
	if !ok {
		if code == 0 {
			fmt.Println("ready")
		}
		return code
	}
	if all == 0 {
		// cgroup v2 alone: the leader is cloned into its cgroup.
		fmt.Println("unsupported: limits need no thread placement on this host")
		fmt.Println("ready")
		return 0
	}
	fmt.Println("placements", all, onMain)
	fmt.Println("ready")
	return 0
}

// TestPlacementNeverOnMainThread: a limited Start on a cgroup v1 host
// places a thread in the tree's cgroups for the fork, and never the main
// thread, whose memory cgroup the kernel charges the whole process's
// memory to (v1 charges by the memory's owner, the main thread), even
// when Start is called from the main thread.
func TestPlacementNeverOnMainThread(t *testing.T) {
	t.Parallel()
	mode := agentproc.UseHelper("limits-from-main")
	_, lines := runHost(t, mode, nil, "GOMAXPROCS=1")
	if len(lines) != 1 {
		t.Fatalf("helper printed %q, want one line", lines)
	}
	if reason, ok := strings.CutPrefix(lines[0], "unsupported: "); ok {
		t.Skip(reason)
	}
	var all, onMain int
	if _, err := fmt.Sscanf(lines[0], "placements %d %d", &all, &onMain); err != nil {
		t.Fatalf("helper printed %q: %v", lines[0], err)
	}
	if all < 20 {
		t.Fatalf("%d thread placements for 20 limited Starts, want one each", all)
	}
	if onMain != 0 {
		t.Errorf("%d of %d thread placements placed the main thread, want none", onMain, all)
	}
}

// hostRunLimited runs "true" with limits l n times, one after the other,
// on m in a helper host. Where the limits cannot be held it prints
// "unsupported: ..." and returns false, 0; on another error it says why on
// stderr and returns false, 1.
func hostRunLimited(ctx context.Context, m *agentproc.Manager, n int, l agentproc.Limits) (ok bool, code int) {
	for range n {
		p, err := m.Start(ctx, agentproc.Request{Command: "true", Limits: l})
		if errors.Is(err, agentproc.ErrUnsupported) {
			fmt.Println("unsupported:", err)
			return false, 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "host: start:", err)
			return false, 1
		}
		if _, err := p.Wait(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "host: wait:", err)
			return false, 1
		}
	}
	return true, 0
}

// TestRecoveryRemovesV1Cgroups: a new Manager on the state dir of a dead
// host recovers a tree whose record names its first cgroup v1 directory
// (as a pure v1 host records it, with no cgroup2 to name) the way it does
// a v2 one: it kills what is left in the tree's v1 cgroups, which a record
// without a leader or a marker in the process's environment leaves as the
// only way to find it, and removes the directory named and its namesake
// in the other v1 hierarchy (cgroup.OpenV1).
func TestRecoveryRemovesV1Cgroups(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes cgroup v1 directories")
	}
	own := hostCgroups(t)
	var dirs []string
	id := uuid.NewString()
	for _, c := range []string{"pids", "cpu"} {
		mnt := "/sys/fs/cgroup/" + c
		if _, err := os.Stat(filepath.Join(mnt, "tasks")); err != nil {
			t.Skipf("no cgroup v1 %s hierarchy at %s", c, mnt)
		}
		d := filepath.Join(mnt, own[c], "agentproc-"+id)
		if err := agentproc.MakeTestCgroup(t, d); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	// No marker and a group of its own: only the cgroup ties it to the tree.
	orphan := exec.Command("sleep", "300")
	orphan.Env = []string{}
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = orphan.Process.Kill()
		_ = orphan.Wait()
	})
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(orphan.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	fds := pinPIDs(t, []int{orphan.Process.Pid})
	dir := t.TempDir()
	writeRecord(t, dir, id, map[string]any{"cgroup": dirs[0]})
	m := newManager(t, agentproc.WithStateDir(dir), agentproc.WithGracePeriod(time.Second))
	infos, err := m.Recovered(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Reason != agentproc.ReasonOrphaned || infos[0].Leftovers != 1 {
		t.Errorf("Recovered: got %+v, want the tree orphaned with 1 leftover", infos)
	}
	// The orphan is the test's child, so it is a zombie now, which a pidfd
	// reports as exited.
	if left := waitExited(fds, testTimeout); left != 0 {
		t.Errorf("%d processes of the tree alive after Recovered, want 0", left)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s: got %v, want removed by Recovered", d, err)
		}
	}
}

func init() {
	agentproc.RegisterHelper("host-held-removal", runHeldRemovalHost, false)
}

// runHeldRemovalHost is runHeldHost with the removal of the limited
// tree's cgroups held after its exit: it prints "exited DIR" for each.
func runHeldRemovalHost() int {
	held, _ := agentproc.HoldCgroupRemoval()
	return runHeldHost("exited", held)
}

// TestHostDeathRemovesExitedTreeCgroups: a host with a state dir is
// SIGKILLed after a tree's exit was published (and the tree unlisted)
// but before its cgroups were removed; its guard removes them, as it
// removes a live tree's.
func TestHostDeathRemovesExitedTreeCgroups(t *testing.T) {
	t.Parallel()
	host, lines := runHost(t, agentproc.UseHelper("host-held-removal"), nil, hostDirEnv+"="+t.TempDir())
	dirs := killHostRequireCgroupsRemoved(t, host, lines, "exited", 1)
	t.Logf("the dead host's exited tree's cgroups removed: %v", dirs)
}

func init() {
	agentproc.RegisterHelper("host-held-new", runHeldNewHost, false)
}

// holdNewEnv is the cgroup.New that runHeldNewHost holds: "1", the first
// limited tree's own; "2", the next set the pool's maker makes after that
// tree's exit.
const holdNewEnv = "AGENTPROC_TEST_HOLD_NEW"

// runHeldNewHost is runHeldHost with the cgroup.New that holdNewEnv names
// held once it has made its directories: it prints "made DIR" for each.
func runHeldNewHost() int {
	n, _ := strconv.Atoi(os.Getenv(holdNewEnv))
	return runHeldHost("made", agentproc.HoldCgroupNew(n))
}

// runHeldHost runs a limited command on a state dir (hostDirEnv) while a
// test hook, set by the caller, holds the Manager at a step of it; once
// held yields the cgroup directories the step holds, it prints "what DIR"
// for each of them and "ready", and blocks until killed. It prints
// "unsupported: ..." and exits where limits cannot be held.
func runHeldHost(what string, held <-chan []string) int {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	m := agentproc.New(agentproc.WithStateDir(filepath.Join(os.Getenv(hostDirEnv), "a")))
	done := make(chan int, 1)
	go func() {
		// A held New never returns: then neither does this Start.
		ok, code := hostRunLimited(ctx, m, 1, agentproc.Limits{Procs: 10})
		if !ok {
			done <- code
		}
	}()
	select {
	case dirs := <-held:
		hostListAndBlock(what, dirs)
	case code := <-done:
		if code == 0 {
			fmt.Println("ready")
		}
		return code
	case <-ctx.Done():
		fmt.Fprintf(os.Stderr, "host: nothing was held (%s)\n", what)
		return 1
	}
	return 0
}

// TestHostDeathInsideCgroupNew: a host with a state dir is SIGKILLed
// while cgroup.New is making a tree's cgroups, for the tree's Start and
// for the next set the pool's maker makes; its guard removes them. Before,
// a directory was listed only once New had returned.
func TestHostDeathInsideCgroupNew(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, n string }{{"start", "1"}, {"pool", "2"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			host, lines := runHost(t, agentproc.UseHelper("host-held-new"), nil, hostDirEnv+"="+t.TempDir(), holdNewEnv+"="+c.n)
			killHostRequireCgroupsRemoved(t, host, lines, "made", 1)
		})
	}
}
