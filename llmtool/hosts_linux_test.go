package llmtool_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/llmtool"
)

// TestBlockedSection checks that a command whose connection the sandbox
// refused gets a result ending with a blocked: section naming the target,
// the rule and what would allow it, and no advice to turn the sandbox off.
func TestBlockedSection(t *testing.T) {
	t.Parallel()
	if !hasNetwork(agentproc.NetworkHosts) {
		t.Skipf("NetworkHosts is not enforced here: %s", agentproc.SandboxSupport())
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	sb := agentproc.WorkspaceSandbox(t.TempDir())
	sb.Network, sb.AllowHosts = agentproc.NetworkHosts, []string{"example.com"}
	requireBlocked(t, sb, "curl -sS https://registry.npmjs.org/; curl -sS https://registry.npmjs.org/x",
		"- connect registry.npmjs.org:443: not in AllowHosts (2 times); what would allow it: add `registry.npmjs.org:443` to allow_hosts\n")
}

// TestBlockedSectionFile checks that a file the policy hides, refused to
// the command, ends its result with a blocked: section naming the path,
// the rule and that nothing in the policy would allow it, never to turn
// the sandbox off. The denial is Inferred (from the command's own
// message), the only file denial there is (docs/sandbox.md).
func TestBlockedSectionFile(t *testing.T) {
	t.Parallel()
	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
	sb := agentproc.WorkspaceSandbox(t.TempDir())
	requireBlocked(t, sb, "cat /etc/shadow; true",
		"- read /etc/shadow: Hide; what would allow it: none: the path is hidden by the policy (a credential); work without it\n")
}

func hasNetwork(n agentproc.Network) bool {
	for _, have := range agentproc.SandboxSupport().Networks {
		if have == n {
			return true
		}
	}
	return false
}

// requireBlocked runs command through execute under sb, in sb's first
// Write directory, and fails the test unless the result ends with a
// blocked: section whose last line is want and that never advises turning
// the sandbox off.
func requireBlocked(t *testing.T, sb *agentproc.Sandbox, command, want string) {
	t.Helper()
	m := agentproc.New()
	defer m.Close()
	tb := llmtool.New(m.Scope("c"), llmtool.Options{Sandbox: sb})
	args, _ := json.Marshal(map[string]any{"command": command, "workdir": sb.Write[0]})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tb.Dispatch(ctx, "execute", args, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(out, "\nblocked: ")
	if !ok || !strings.HasSuffix(section, want) {
		t.Errorf("result: got\n%s\nwant it to end with a blocked: section ending %q", out, want)
	}
	for _, bad := range []string{"disable", "turn off", "without the sandbox"} {
		if strings.Contains(strings.ToLower(section), bad) {
			t.Errorf("blocked section says %q:\n%s", bad, section)
		}
	}
}
