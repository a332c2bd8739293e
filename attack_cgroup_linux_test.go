package agentproc_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// clone3CgroupEnv names the cgroup directory the "clone3cgroup" helper
// starts a child in.
const clone3CgroupEnv = "AGENTPROC_TEST_CLONE3_CGROUP"

func init() {
	agentproc.RegisterHelper("clone3cgroup", helperClone3Cgroup, false)
	agentproc.RegisterHelper("cloneparent", helperCloneParent, false)
}

// helperCloneParent starts true three times with CLONE_PARENT, so that
// each is a child of this process's parent, and prints each one's PID
// ("denied: ERR" and exit 1 when the kernel refuses). It does not wait:
// the children are not its own.
func helperCloneParent() int {
	for range 3 {
		cmd := exec.Command("true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_PARENT}
		if err := cmd.Start(); err != nil {
			fmt.Println("denied:", err)
			return 1
		}
		fmt.Println("pid", cmd.Process.Pid)
	}
	return 0
}

// TestAttackHostZombies: a tree's leader is a child of the host, and a
// child it starts with clone(CLONE_PARENT) is the host's child too, one
// the host never waits for: its zombie holds a PID until the host exits.
// One command made 200 (as root and not), which outlived its end; in a
// loop they use up the user's process limit or the system's PIDs, and the
// host (the agent) can no longer start anything. seccomp now refuses
// CLONE_PARENT on clone, and clone3 (whose flags it cannot read) answers
// ENOSYS where the tree's own fork does not need it (confine.
// SeccompForkFilter). Runs as root and, through TestSandboxUnprivileged,
// not. The control makes the zombies from an unconfined tree, and reaps
// them.
func TestAttackHostZombies(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	zombies := func(out string) []int {
		var pids []int
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "pid" {
				pid, _ := strconv.Atoi(f[1])
				stat, err := os.ReadFile("/proc/" + f[1] + "/stat")
				if _, rest, ok := strings.Cut(string(stat), ") "); err == nil && ok {
					if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
						pids = append(pids, pid)
					}
				}
			}
		}
		return pids
	}
	reap := func(pids []int) {
		for _, pid := range pids {
			_, _ = unix.Wait4(pid, nil, 0, nil)
		}
	}
	ctl := runSandboxed(t, newManager(t), helperRequest(t, "cloneparent"))
	if pids := zombies(ctl.Text); len(pids) == 0 {
		t.Fatalf("control: an unconfined tree's CLONE_PARENT children: output %q, want children of this process", ctl.Text)
	} else {
		reap(pids)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	r := helperRequest(t, "cloneparent")
	r.WorkDir = ws
	out := runSandboxed(t, m, r)
	t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
	if pids := zombies(out.Text); len(pids) != 0 {
		reap(pids)
		t.Errorf("a sandboxed tree made %d children of the host with CLONE_PARENT (output %q), want it refused", len(pids), out.Text)
	}
}

// helperClone3Cgroup starts cat /proc/self/cgroup with clone3 and
// CLONE_INTO_CGROUP into the directory clone3CgroupEnv names (os/exec's
// UseCgroupFD), and prints what the child says.
func helperClone3Cgroup() int {
	dir := os.Getenv(clone3CgroupEnv)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("denied: open:", err)
		return 1
	}
	cmd := exec.Command("cat", "/proc/self/cgroup")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.CombinedOutput()
	fmt.Printf("%s", out)
	if err != nil {
		fmt.Println("denied:", err)
		return 1
	}
	return 0
}

// TestAttackCgroupEscapeByClone3: a sandboxed tree leaves its cgroup, and
// so the Manager's kill at Stop and Close and its Limits, by starting a
// child with clone3(CLONE_INTO_CGROUP) in another cgroup it can write.
// Landlock refuses writing cgroup.procs (an open), but the kernel checks
// clone3's target with inode_permission only, where Landlock has no hook;
// seccomp cannot read clone3's argument structure, and the Manager itself
// forks the shell with that very call from the confined thread (so
// refusing clone3 in the filter would refuse the Start). As root (no
// capabilities, but uid 0 owns every cgroup) any cgroup was reachable, the
// root cgroup included; without root every cgroup the user was delegated
// (checked by hand with a chown'ed cgroup: a `setsid env -i` child there
// outlived Close). As root the tree is now born in a cgroup namespace of
// its own rooted at its cgroup (sandboxBuilt.ownCgroupNS), and where
// cgroup2 is mounted with nsdelegate the kernel refuses a move out of the
// mover's namespace. It runs as root where cgroup2 has nsdelegate: in the
// VM of .ci/test-cgroup-vm.sh (part of CI), which mounts it so, as systemd
// does; a host without nsdelegate (this project's hybrid machines) skips
// with "open here", and so does a run without root. The control starts the
// same child into the same cgroup from an unconfined tree.
func TestAttackCgroupEscapeByClone3(t *testing.T) {
	// Counted as used where the test skips (a host without nsdelegate),
	// so that TestMain's check of unused helper modes passes there.
	agentproc.UseHelper("clone3cgroup")
	requireSandbox(t)
	if !isRoot() {
		t.Skip("open without root: the host cannot give the tree a cgroup namespace (that takes CAP_SYS_ADMIN, or a user namespace), so a tree of a user with a delegated cgroup v2 starts a child in any cgroup of it (docs/sandbox-threats.md)")
	}
	parent, outside := cgroupParent(t), cgroupParent(t)
	mnt, _ := testCgroupMountOf(parent)
	if !testCgroupNSDelegate() {
		t.Skipf("open here: cgroup2 (%s) is mounted without nsdelegate, so the tree's cgroup namespace is no boundary to clone3(CLONE_INTO_CGROUP); .ci/test-cgroup-vm.sh runs this test with nsdelegate", mnt)
	}
	// in reports whether a helper's output shows its child in outside: by
	// the cgroup's name, since in a cgroup namespace /proc/PID/cgroup
	// shows the path from the namespace's root (0::/../../NAME).
	in := func(text string) bool { return strings.Contains(text, "/"+filepath.Base(outside)+"\n") }
	req := func(t *testing.T) agentproc.Request {
		r := helperRequest(t, "clone3cgroup")
		r.Env[clone3CgroupEnv] = outside
		return r
	}
	ctl := runSandboxed(t, newManager(t, agentproc.WithCgroup(parent)), req(t))
	if !in(ctl.Text) {
		t.Fatalf("control: an unconfined tree's child in %s: output %q, want it there", outside, ctl.Text)
	}
	ws := t.TempDir()
	m := newManager(t, agentproc.WithCgroup(parent), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	r := req(t)
	r.WorkDir = ws
	out := runSandboxed(t, m, r)
	t.Logf("exit %d: %q", exitCode(out.Info), out.Text)
	if in(out.Text) || !strings.Contains(out.Text, "denied") {
		t.Errorf("a sandboxed tree started a child in %s, outside its cgroup: output %q, want it refused", outside, out.Text)
	}
	// The tree sees its own cgroup as its namespace's root.
	// Its mountinfo shows the cgroup2 mount rooted above it (/../..),
	// which is why the Go runtime, which wants the mount's root to prefix
	// the cgroup's path, finds no CPU limit there (docs/sandbox.md).
	own := runSandboxed(t, m, agentproc.Request{Command: "cat /proc/self/cgroup; grep cgroup2 /proc/self/mountinfo", WorkDir: ws})
	t.Logf("a sandboxed tree's cgroup and cgroup2 mounts: %q", own.Text)
	if !strings.Contains("\n"+own.Text, "\n0::/\n") {
		t.Errorf("a sandboxed tree's /proc/self/cgroup: got %q, want the line 0::/", own.Text)
	}
}

// TestAttackCgroupEscapeByClone3Warns: where the escape above stays open
// for a sandboxed tree started in its cgroup v2 (no root, so no cgroup
// namespace; or cgroup2 without nsdelegate), its Info.Warnings says so;
// where it is closed (root and nsdelegate: the cgroup v2 VM) they do not.
func TestAttackCgroupEscapeByClone3Warns(t *testing.T) {
	requireSandbox(t)
	parent := cgroupParent(t)
	ws := t.TempDir()
	m := newManager(t, agentproc.WithCgroup(parent), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	out := runSandboxed(t, m, agentproc.Request{Command: "true", WorkDir: ws})
	warned := strings.Contains(strings.Join(out.Info.Warnings, "\n"), "CLONE_INTO_CGROUP")
	open := !isRoot() || !testCgroupNSDelegate()
	if warned != open {
		t.Errorf("root %v, nsdelegate %v: warnings %q: got a clone3 warning %v, want %v", isRoot(), testCgroupNSDelegate(), out.Info.Warnings, warned, open)
	}
}

// testCgroupNSDelegate reports whether cgroup2 is mounted with nsdelegate
// (one superblock: every cgroup2 mount shows the same options).
func testCgroupNSDelegate() bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		_, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(post); ok && len(f) >= 3 && f[0] == "cgroup2" {
			return slices.Contains(strings.Split(f[2], ","), "nsdelegate")
		}
	}
	return false
}

// testCgroupMountOf returns the cgroup v2 mount dir lies in.
func testCgroupMountOf(dir string) (string, bool) {
	for _, m := range testCgroup2Mounts() {
		if dir == m || strings.HasPrefix(dir, m+"/") {
			return m, true
		}
	}
	return "", false
}
