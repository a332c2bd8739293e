package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// Tests of the seventh attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Seventh attack review (unprivileged and the
// surfaces)".

// filtersEnv makes the test binary, before anything else runs, set
// no_new_privs and install that many seccomp filters that allow every
// call, on every thread: a serve hardened the way a systemd unit's
// NoNewPrivileges= and SystemCallFilter= (one filter per setting) do.
const filtersEnv = "AGENTPROC_TEST_SECCOMP_FILTERS"

func init() {
	n, err := strconv.Atoi(os.Getenv(filtersEnv))
	if err != nil || n <= 0 {
		return
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	allow := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	prog := unix.SockFprog{Len: 1, Filter: &allow[0]}
	for range n {
		// TSYNC: the runtime's other threads get the filter and
		// no_new_privs too.
		if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
			unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
			panic(errno)
		}
	}
}

// TestAttackServeHardenedPeerCount: serve judges a peer confined when it
// has more seccomp filters than serve itself (or no_new_privs, a smaller
// bounding set, another namespace), counting Seccomp_filters in
// /proc/PID/status. A count says nothing of whose filters they are: where
// serve itself runs under filters (a systemd unit with NoNewPrivileges=
// and SystemCallFilter=, each setting a filter of its own), a tree that
// another, unhardened Manager of the user sandboxed (an `agentproc mcp`
// session: the tree has that Manager's filters, none, plus the sandbox's
// two) has no more than serve, and serve ran its request unconfined. The
// control: the same request from the same Manager's unsandboxed tree runs.
func TestAttackServeHardenedPeerCount(t *testing.T) {
	ctx, outside := sandboxAttack(t)
	dir, ws := t.TempDir(), t.TempDir()
	sock := filepath.Join(dir, "agentproc.sock")
	cmd := agentprocCmd("serve", "--socket", sock, "--workdir", dir, "--grace", "2s")
	cmd.Env = append(cmd.Env, filtersEnv+"=3")
	startServeCmd(t, ctx, cmd)
	m := agentproc.New()
	defer m.Close()
	target := filepath.Join(outside, "f")
	client := runMainEnv + "=1 " + socketEnv + "=" + shellQuote(sock) + " " + shellQuote(os.Args[0]) + " run -- " + shellQuote("echo x > "+shellQuote(target))
	attack := treeRunner(t, ctx, m, ws)
	if out := attack(client, nil); out.Info.ExitCode == nil || *out.Info.ExitCode != 0 || !written(target) {
		t.Fatalf("control: an unsandboxed tree's request: %s %q, want it run and the file written", out.Info.Reason, out.Text)
	}
	// The tree may lower its hard core limit (no privilege needed), so
	// that it no longer reads as the sandbox's 1.
	for name, prefix := range map[string]string{"as it is": "", "hard core limit lowered to 0": "ulimit -Sc 0; ulimit -Hc 0; grep core /proc/self/limits; "} {
		out := attack(prefix+"grep -E '^(Seccomp_filters|NoNewPrivs)' /proc/self/status | tr '\\n' ' '; "+client, agentproc.WorkspaceSandbox(ws))
		t.Logf("%s: sandboxed tree: %s: %q", name, out.Info.Reason, out.Text)
		if !strings.Contains(out.Text, "sandboxed process") {
			t.Errorf("%s: output %q, want serve's refusal", name, out.Text)
		}
		if written(target) {
			t.Errorf("%s: serve ran the sandboxed tree's command (written outside its sandbox), want it refused", name)
		}
	}
}

// sandboxUser is the useradd user the CI creates for unprivileged tests
// (.ci/install-test-deps.sh).
const sandboxUser = testuser.Name

// TestAttackServeHardenedPeerCountUnprivileged re-runs
// TestAttackServeHardenedPeerCount as the unprivileged test user: as root
// the tree's smaller capability bounding set gives it away, without root
// nothing of the counts does.
func TestAttackServeHardenedPeerCountUnprivileged(t *testing.T) {
	out, err := testuser.Run(t, 2*time.Minute, nil, "-test.run=^TestAttackServeHardenedPeerCount$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	if !strings.Contains(out, "--- PASS: TestAttackServeHardenedPeerCount ") {
		t.Errorf("as %s: got no PASS line, want one\n%s", sandboxUser, out)
	}
}
