package httpapi_test

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// TestAllowHostsOnlyNarrows checks that a client's allow_hosts can only
// name what the operator's allows, and that a refused connection shows in
// the process's denials with its rule and hint.
func TestAllowHostsOnlyNarrows(t *testing.T) {
	t.Parallel()
	op := agentproc.WorkspaceSandbox(t.TempDir())
	op.Network, op.AllowHosts = agentproc.NetworkHosts, []string{"*.example.com", "example.org"}
	s := newTestServer(t, nil, nil, httpapi.WithSandbox(op))
	for _, body := range []string{
		`"sandbox":{"network":"hosts","allow_hosts":["registry.npmjs.org"]}`,
		`"sandbox":{"network":"hosts","allow_hosts":["example.org:22"]}`,
		`"sandbox":{"network":"hosts","allow_hosts":["example.com"]}`,
		`"sandbox":{"network":"host"}`,
	} {
		obj := wantError(t, s.raw(t, "POST", "/start", `{"command":"true",`+body+`}`), http.StatusForbidden)
		if d, _ := obj["detail"].(string); !strings.Contains(d, "Sandbox.") {
			t.Errorf("%s: detail %q, want it to name the field", body, d)
		}
	}
	obj := wantError(t, s.raw(t, "POST", "/start", `{"command":"true","sandbox":{"network":"hosts","allow_hosts":["*"]}}`), http.StatusBadRequest)
	if d, _ := obj["detail"].(string); !strings.Contains(d, `"*"`) {
		t.Errorf("bare *: detail %q, want it to name the entry", d)
	}
	if got := s.m.List(); len(got) != 0 {
		t.Fatalf("refused sandboxes started %d processes", len(got))
	}
	if !hasHostsNetwork() {
		t.Skipf("NetworkHosts is not enforced here: %s", agentproc.SandboxSupport())
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	id := start(t, s.client(), httpapi.StartRequest{Command: "curl -sS https://registry.npmjs.org/", WorkDir: op.Write[0],
		Sandbox: &httpapi.Sandbox{Network: "hosts", AllowHosts: []string{"a.example.com"}}})
	if _, err := s.client().Output(testContext(t), id, httpapi.OutputOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	p, err := s.client().Get(testContext(t), id)
	if err != nil {
		t.Fatal(err)
	}
	want := httpapi.Denial{Kind: "network", Op: "connect", Target: "registry.npmjs.org:443", Rule: "not in AllowHosts", Count: 1,
		Hint: "add `registry.npmjs.org:443` to allow_hosts"}
	if len(p.Denials) != 1 || p.Denials[0] != want {
		t.Errorf("denials: got %+v, want [%+v]", p.Denials, want)
	}
}

func hasHostsNetwork() bool {
	for _, n := range agentproc.SandboxSupport().Networks {
		if n == agentproc.NetworkHosts {
			return true
		}
	}
	return false
}
