package agentproc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// delegEnv names the cgroup the "auto-host" helper moves itself into
// before it makes its Manager.
const delegEnv = "AGENTPROC_TEST_DELEGATED"

// The helper mode "auto-host" plays an agent started the systemd way
// (systemd-run --scope -p Delegate=yes): it moves itself into the cgroup
// v2 directory delegEnv names, which then holds it alone, and starts one
// command with a process limit under WithCgroup(CgroupAuto). It prints the
// command's output, which names the command's cgroup and its pids.max, and
// then its own cgroup.
func init() {
	agentproc.RegisterHelper("auto-host", func() int {
		deleg := os.Getenv(delegEnv)
		if err := os.WriteFile(filepath.Join(deleg, "cgroup.procs"), []byte(fmt.Sprint(os.Getpid())), 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		m := agentproc.New(agentproc.WithCgroup(agentproc.CgroupAuto))
		defer m.Close()
		ctx := context.Background()
		p, err := m.Start(ctx, agentproc.Request{
			Command: `g=$(sed -n 's/^0:://p' /proc/self/cgroup); echo "tree $g"; echo "pids.max $(cat /sys/fs/cgroup$g/pids.max)"`,
			Limits:  agentproc.Limits{Procs: 20},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := p.Wait(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Print(p.Output().Text)
		self := strings.TrimSpace(strings.TrimPrefix(string(must(os.ReadFile("/proc/self/cgroup"))), "0::"))
		fmt.Printf("host %s\n", self)
		return 0
	}, false)
}

// TestLimitsCgroupAuto runs the systemd delegation pattern for real on a
// cgroup v2 host with the controllers (the QEMU VM of make test-cgroup-vm):
// a host alone in a delegated cgroup, not the root, gets limits with
// WithCgroup(CgroupAuto) by moving itself into <own>/agentproc-host and
// enabling the controllers in <own>. It skips where the host's cgroup v2 is
// not the root of a hierarchy with the pids controller (on this project's
// hybrid machines pids is bound to cgroup v1).
func TestLimitsCgroupAuto(t *testing.T) {
	t.Parallel()
	mode := agentproc.UseHelper("auto-host")
	mounts := testCgroup2Mounts()
	self := string(must(os.ReadFile("/proc/self/cgroup")))
	if len(mounts) == 0 || !strings.Contains(self, "0::/\n") || os.Geteuid() != 0 {
		t.Skip("needs root in the root cgroup of a cgroup v2 hierarchy")
	}
	root := mounts[0]
	if !readCgroupList(t, filepath.Join(root, "cgroup.controllers"))["pids"] {
		t.Skipf("the cgroup v2 hierarchy at %s has no pids controller (it is bound to cgroup v1 here)", root)
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
		t.Skipf("cannot enable pids in %s: %v", root, err)
	}
	deleg := testCgroup(t, root, "deleg")
	cmd := exec.CommandContext(testContext(t), os.Args[0])
	cmd.Env = append(os.Environ(), agentproc.HelperEnv+"="+mode, delegEnv+"="+deleg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the delegated host failed: %v\n%s", err, out)
	}
	rel := strings.TrimPrefix(deleg, root)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "tree "+rel+"/agentproc-") || lines[1] != "pids.max 20" ||
		lines[2] != "host "+rel+"/agentproc-host" {
		t.Errorf("got %q, want the tree in %s/agentproc-<id> with pids.max 20 and the host in %s/agentproc-host", out, rel, rel)
	}
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(deleg, "cgroup.subtree_control"))))); !strings.Contains(got, "pids") {
		t.Errorf("%s cgroup.subtree_control: got %q, want pids enabled", deleg, got)
	}
	t.Logf("delegated host: %q", out)
}
