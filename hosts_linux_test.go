package agentproc_test

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// registryReachable skips t unless host answers on port 443 directly
// from here.
func registryReachable(t *testing.T, host string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", host+":443", 5*time.Second)
	if err != nil {
		t.Skipf("%s is not reachable from here (%v): the test needs a package registry", host, err)
	}
	_ = c.Close()
}

func hostsSandbox(t *testing.T, hosts ...string) *agentproc.Sandbox {
	t.Helper()
	sb := agentproc.WorkspaceSandbox(t.TempDir())
	sb.Network, sb.AllowHosts = agentproc.NetworkHosts, hosts
	return sb
}

func requireHosts(t *testing.T) {
	t.Helper()
	requireSandbox(t)
	if !hasNetwork(agentproc.NetworkHosts) {
		t.Skipf("NetworkHosts is not enforced here: %s", agentproc.SandboxSupport())
	}
}

func runSh(t *testing.T, m *agentproc.Manager, sb *agentproc.Sandbox, command string) agentproc.Output {
	t.Helper()
	return runSandboxed(t, m, agentproc.Request{Command: command, Sandbox: sb, WorkDir: sb.Write[0], Timeout: 60 * time.Second})
}

func TestSandboxHostsCurl(t *testing.T) {
	requireHosts(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	registryReachable(t, "proxy.golang.org")
	m := newManager(t)
	sb := hostsSandbox(t, "proxy.golang.org")
	out := runSh(t, m, sb, "curl -sSf https://proxy.golang.org/github.com/google/uuid/@v/list")
	if *out.ExitCode != 0 || !strings.Contains(out.Text, "v1.") {
		t.Fatalf("allowed: got exit %d %q, want the module's versions", *out.ExitCode, out.Text)
	}
	out = runSh(t, m, sb, "curl -sSf https://registry.npmjs.org/")
	if *out.ExitCode == 0 {
		t.Fatalf("refused: got exit 0 %q, want a failure", out.Text)
	}
	if len(out.Denials) != 1 || out.Denials[0].Target != "registry.npmjs.org:443" || out.Denials[0].Rule != "not in AllowHosts" {
		t.Fatalf("denials: got %+v, want registry.npmjs.org:443 not in AllowHosts", out.Denials)
	}
	_ = context.Background
}
