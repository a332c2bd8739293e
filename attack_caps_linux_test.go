package agentproc_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// inheritedCapsEnv marks the child TestAttackInheritedCapabilities runs
// under setpriv.
const inheritedCapsEnv = "AGENTPROC_TEST_INHERITED_CAPS"

// TestAttackInheritedCapabilities: a host that runs with capabilities in
// its inheritable set (as root: capsh or setpriv --inh-caps, containers
// of Docker before 20.10.14) or in its ambient set (an unprivileged
// service's AmbientCapabilities=) handed them to every tree. The bounding
// set the sandbox empties does not hold them: on exec root gets its
// inheritable set as well as its bounding set, and any user keeps its
// ambient set; no_new_privs keeps what the thread already had. As root
// the tree made a block device node of the host's disk in its workspace
// (CAP_MKNOD), readable by every local user. Each sandboxed thread now
// empties its inheritable and ambient sets too (confine.Thread). The
// control: an unconfined tree of the same host has the capabilities.
func TestAttackInheritedCapabilities(t *testing.T) {
	requireSandbox(t)
	if os.Getenv(inheritedCapsEnv) != "" {
		inheritedCapsChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("as root only: setpriv gives the test's child its capabilities")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy any user can run: the test binary's own directory is root's.
	dir := t.TempDir()
	bin := testuser.CopyBinary(t, exe, dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
	}{
		{"root, inheritable", []string{"--inh-caps=+mknod,+net_admin"}},
	}
	if u, err := user.Lookup(sandboxUser); err == nil {
		cases = append(cases, struct {
			name string
			args []string
		}{"unprivileged, ambient", []string{"--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups",
			"--inh-caps=+mknod,+net_admin", "--ambient-caps=+mknod,+net_admin"}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(testContext(t), 2*time.Minute)
			defer cancel()
			args := append(slices.Clone(c.args), "--", bin, "-test.count=1", "-test.v", "-test.run=^TestAttackInheritedCapabilities$")
			cmd := exec.CommandContext(ctx, setpriv, args...)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + os.TempDir(), "LANG=C", inheritedCapsEnv + "=1"}
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestAttackInheritedCapabilities") {
				t.Errorf("under setpriv %s: %v\n%s", strings.Join(c.args, " "), err, out)
			}
		})
	}
}

// inheritedCapsChild is TestAttackInheritedCapabilities run under setpriv.
func inheritedCapsChild(t *testing.T) {
	ws := t.TempDir()
	probe := agentproc.Request{WorkDir: ws, Command: `grep ^Cap /proc/self/status; mknod node c 1 3 && echo made-node`}
	ctl := runSandboxed(t, newManager(t), probe)
	if !strings.Contains(ctl.Text, "made-node") || capSet(ctl.Text, "CapEff") == 0 {
		t.Fatalf("control: an unconfined tree got %q, want capabilities and the node made", ctl.Text)
	}
	if err := os.Remove(filepath.Join(ws, "node")); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	// Three times: the third Start takes the ready thread, confined ahead.
	for range 3 {
		out := runSandboxed(t, m, probe)
		for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
			if v := capSet(out.Text, k); v != 0 {
				t.Errorf("%s of a sandboxed tree: got %x, want none (output %q)", k, v, out.Text)
			}
		}
		if strings.Contains(out.Text, "made-node") {
			t.Errorf("a sandboxed tree made a device node in its workspace: output %q, want mknod refused", out.Text)
			_ = os.Remove(filepath.Join(ws, "node"))
		}
		if t.Failed() {
			return
		}
	}
}

// capSet is the capability set named k ("CapEff") in status's lines, 0
// where it is missing.
func capSet(status, k string) uint64 {
	for line := range strings.SplitSeq(status, "\n") {
		if name, v, ok := strings.Cut(line, ":"); ok && name == k {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n
		}
	}
	return 0
}
