package main

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// TestMCPAllowHostBlocked: under agentproc mcp --allow-host, a command's
// connection to a host not listed is refused, and the result's blocked:
// section names it, its rule and what would allow it.
func TestMCPAllowHostBlocked(t *testing.T) {
	t.Parallel()
	if !slices.Contains(agentproc.SandboxSupport().Networks, agentproc.NetworkHosts) {
		t.Skipf("NetworkHosts is not enforced here: %s", agentproc.SandboxSupport())
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newGoClient(t, ctx, agentprocCmd("mcp", "--workdir", t.TempDir(), "--allow-host", "example.com", "--allow-host", "*.example.org"))
	defer c.close()
	tools, err := c.tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tools[0].Description, "example.com, *.example.org") {
		t.Errorf("execute's description does not list the hosts:\n%s", tools[0].Description)
	}
	res, err := c.call(ctx, "execute", map[string]any{"command": "curl -sS https://registry.npmjs.org/"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "blocked: "
	line := "- connect registry.npmjs.org:443: not in AllowHosts; what would allow it: add `registry.npmjs.org:443` to allow_hosts\n"
	if !strings.Contains(res.text, want) || !strings.HasSuffix(res.text, line) {
		t.Errorf("result: got\n%s\nwant it to end with a blocked: section with %q", res.text, line)
	}
}

// TestAllowHostFlag: --allow-host is checked and needs the workspace
// sandbox.
func TestAllowHostFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flags managerFlags
		want  string
	}{
		{managerFlags{workdir: "/tmp", sandbox: "workspace", hosts: hostList{"*"}}, `"*"`},
		{managerFlags{workdir: "/tmp", sandbox: "none", hosts: hostList{"example.com"}}, "--sandbox=workspace"},
		{managerFlags{workdir: "/tmp", sandbox: "workspace", network: "host", hosts: hostList{"example.com"}}, "--network=hosts"},
		{managerFlags{workdir: "/tmp", sandbox: "workspace", network: "hosts"}, "--allow-host"},
	} {
		if _, err := c.flags.sandboxPolicy(false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error naming %s", c.flags, err, c.want)
		}
	}
	f := managerFlags{workdir: "/tmp", sandbox: "workspace", hosts: hostList{"example.com", "go.dev:8443"}}
	sb, err := f.sandboxPolicy(false)
	if err != nil || sb.Network != agentproc.NetworkHosts || !slices.Equal(sb.AllowHosts, []string{"example.com", "go.dev:8443"}) {
		t.Errorf("got %+v, %v; want NetworkHosts with the two hosts", sb, err)
	}
}
