package httpapi_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// TestSandboxOnlyNarrows checks that a start request's sandbox can narrow
// the operator's policy and never loosen it: each loosening is a 403
// naming the field, and nothing starts.
func TestSandboxOnlyNarrows(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	op := agentproc.WorkspaceSandbox(ws)
	op.Env.Keep = []string{"GH_TOKEN"}
	s := newTestServer(t, nil, nil, httpapi.WithSandbox(op))
	for _, c := range []struct {
		body, field string
	}{
		{`"sandbox":{"network":"host"}`, "Sandbox.Network"},
		{`"sandbox":{"network":"loopback"}`, "Sandbox.Network"},
		{`"sandbox":{"write":["/"]}`, "Sandbox.Write[0]"},
		{`"sandbox":{"write":["` + filepath.Dir(ws) + `"]}`, "Sandbox.Write[0]"},
		{`"sandbox":{"env_keep":["AWS_SECRET_ACCESS_KEY"]}`, "Sandbox.Env.Keep[0]"},
		{`"sandbox":{"best_effort":true}`, "Sandbox.BestEffort"},
		{`"workdir":"/"`, "workdir"},
	} {
		r := s.raw(t, "POST", "/start", `{"command":"true",`+c.body+`}`)
		obj := wantError(t, r, http.StatusForbidden)
		if d, _ := obj["detail"].(string); !strings.Contains(d, c.field) {
			t.Errorf("%s: detail %q, want it to name %s", c.body, d, c.field)
		}
	}
	wantError(t, s.raw(t, "POST", "/start", `{"command":"true","sandbox":{"network":"wifi"}}`), http.StatusBadRequest)
	if got := s.m.List(); len(got) != 0 {
		t.Fatalf("refused sandboxes started %d processes", len(got))
	}

	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here to start under: %s", f)
	}
	// Narrowing is fine, and the process says how it is confined.
	id := start(t, s.client(), httpapi.StartRequest{Command: "echo hi > " + filepath.Join(ws, "f") + " && cat f", WorkDir: ws,
		Sandbox: &httpapi.Sandbox{Hide: []string{filepath.Join(ws, "..", "x")}, EnvDrop: []string{"DATABASE_URL"}}})
	if _, err := s.client().Output(testContext(t), id, httpapi.OutputOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	p, err := s.client().Get(testContext(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if p.ExitCode == nil || *p.ExitCode != 0 || p.Sandbox == nil || p.Sandbox.Network != "none" ||
		!strings.Contains(strings.Join(p.Sandbox.Mechanisms, ","), "landlock") {
		t.Errorf("narrowed start: exit %v, sandbox %+v; want exit 0 under landlock with no network", p.ExitCode, p.Sandbox)
	}
}

// TestManagerSandboxIsTheOperators checks that without WithSandbox the
// Manager's default is the policy a client cannot loosen.
func TestManagerSandboxIsTheOperators(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	s := newTestServer(t, []agentproc.Option{agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))}, nil)
	wantError(t, s.raw(t, "POST", "/start", `{"command":"true","sandbox":{"network":"host"}}`), http.StatusForbidden)
}
