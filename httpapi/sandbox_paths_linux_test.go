package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

func requireSandbox(t *testing.T) {
	t.Helper()
	if f := agentproc.SandboxSupport(); !f.Supported {
		t.Skipf("no sandbox here: %s", f)
	}
}

// linkedWorkspace makes ws with ws/link pointing at outside (which holds
// a directory sub), and a directory in ws named as outside is.
func linkedWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	ws, outside = t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	// What ws/link/../<outside's name> would be, were ".." applied to the
	// name instead of to the link's target.
	if err := os.Mkdir(filepath.Join(ws, filepath.Base(outside)), 0o755); err != nil {
		t.Fatal(err)
	}
	return ws, outside
}

// wantNothingIn fails the test if dir holds more than sub.
func wantNothingIn(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "sub" {
			t.Errorf("%s was written outside the workspace, want nothing", e.Name())
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "sub")); len(ents) != 0 {
		t.Errorf("%d entries written in %s/sub, want none", len(ents), dir)
	}
}

// TestSandboxLinkWorkDirRefused is row 1 of issue 37 through httpapi: a
// work dir or a Write path inside the operator's workspace that is a link
// to outside it (or has one in an intermediate component) is refused with
// 403, as a path written outside is, and nothing is written outside. The
// control writes through the same link with no sandbox.
func TestSandboxLinkWorkDirRefused(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	ws, outside := linkedWorkspace(t)
	free := newTestServer(t, nil, nil)
	id := start(t, free.client(), httpapi.StartRequest{Command: "echo x > f", WorkDir: filepath.Join(ws, "link")})
	if _, err := free.client().Output(testContext(t), id, httpapi.OutputOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(outside, "f")); err != nil {
		t.Fatalf("control: got %v, want the unconfined write through the link to land outside", err)
	}

	s := newTestServer(t, nil, nil, httpapi.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	link, sub := filepath.Join(ws, "link"), filepath.Join(ws, "link", "sub")
	for _, c := range []struct{ body, field string }{
		{`"workdir":"` + link + `"`, "workdir"},
		{`"workdir":"` + sub + `"`, "workdir"},
		{`"workdir":"` + link + `/../` + filepath.Base(outside) + `"`, "workdir"}, // ".." applies to the link's target: outside, not ws/<its name>
		{`"sandbox":{"write":["` + link + `"]}`, "Sandbox.Write[0]"},
		{`"sandbox":{"write":["` + sub + `"]}`, "Sandbox.Write[0]"},
	} {
		r := s.raw(t, "POST", "/start", `{"command":"echo x > f; echo x > `+sub+`/g",`+c.body+`}`)
		obj := wantError(t, r, http.StatusForbidden)
		if d, _ := obj["detail"].(string); !strings.Contains(d, c.field) {
			t.Errorf("%s: detail %q, want it to name %s", c.body, d, c.field)
		}
	}
	if got := s.m.List(); len(got) != 0 {
		t.Errorf("refused starts started %d processes, want 0", len(got))
	}
	wantNothingIn(t, outside)
}

// newCoderAgentWith is newCoderAgent with the handler's options too.
func newCoderAgentWith(t *testing.T, mopts []agentproc.Option, hopts ...httpapi.Option) *coderAgent {
	t.Helper()
	m := agentproc.New(mopts...)
	h := http.StripPrefix(coderPrefix, httpapi.NewHandler(m, append([]httpapi.Option{quiet(), httpapi.WithCoderCompat()}, hopts...)...))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	return &coderAgent{t: t, m: m, handler: h, srv: srv}
}

// TestCoderProfileAppliesSandbox is row 5 of issue 37: the Coder profile's
// POST /start runs under the operator's policy (WithSandbox, else the
// Manager's default) and refuses a work dir outside its Write (or
// resolving outside through a link) with 403, as the default profile
// does. The control is the same request to a Coder profile without a
// sandbox, which writes outside.
func TestCoderProfileAppliesSandbox(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	ws, outside := linkedWorkspace(t)
	write := "echo x > " + filepath.Join(outside, "f")

	free := newCoderAgent(t)
	free.waitExit(free.mustStart(cStartRequest{Command: write, WorkDir: ws}, ""))
	if err := os.Remove(filepath.Join(outside, "f")); err != nil {
		t.Fatalf("control: got %v, want the unconfined write to land outside", err)
	}

	for name, a := range map[string]*coderAgent{
		"WithSandbox":       newCoderAgentWith(t, nil, httpapi.WithSandbox(agentproc.WorkspaceSandbox(ws))),
		"Manager's default": newCoderAgent(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))),
	} {
		t.Run(name, func(t *testing.T) {
			a.t = t
			out := a.waitExit(a.mustStart(cStartRequest{Command: write, WorkDir: ws}, ""))
			if out.ExitCode == nil || *out.ExitCode == 0 {
				t.Errorf("a write outside the workspace: exit code 0 (or none), output %q; want it refused", out.Output)
			}
			for _, dir := range []string{outside, filepath.Join(ws, "link"), filepath.Join(ws, "link", "sub")} {
				code, resp, e := a.start(cStartRequest{Command: "echo x > f", WorkDir: dir}, "")
				if code != http.StatusForbidden || !strings.Contains(e.Detail, "workdir") {
					t.Errorf("workdir %s: %d %+v %+v, want 403 naming the workdir", dir, code, resp, e)
				}
			}
			wantNothingIn(t, outside)
		})
	}
}

// TestNilSandboxHoldsWorkDirInManagerDefault: WithSandbox(nil) leaves the
// handler without an operator's policy, but a start that asks for none
// still runs under the Manager's default, and under it the work dir is
// writable to its tree. A client's work dir outside that default's Write
// (or through a link out of it) was taken and written (eleventh attack
// review, "Noticed, left alone"); it is now refused with 403 in both
// profiles. The controls: a work dir inside the workspace runs and writes
// there.
func TestNilSandboxHoldsWorkDirInManagerDefault(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	ws, outside := linkedWorkspace(t)
	mopts := []agentproc.Option{agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))}
	refused := []string{outside, filepath.Join(ws, "link"), filepath.Join(ws, "link", "sub")}

	t.Run("default profile", func(t *testing.T) {
		s := newTestServer(t, mopts, nil, httpapi.WithSandbox(nil))
		id := start(t, s.client(), httpapi.StartRequest{Command: "echo x > f1", WorkDir: ws})
		if _, err := s.client().Output(testContext(t), id, httpapi.OutputOptions{Wait: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(ws, "f1")); err != nil {
			t.Fatalf("control: %v, want the write in the workspace to land", err)
		}
		for _, dir := range refused {
			r := s.raw(t, "POST", "/start", `{"command":"echo x > f","workdir":"`+dir+`"}`)
			obj := wantError(t, r, http.StatusForbidden)
			if d, _ := obj["detail"].(string); !strings.Contains(d, "workdir") {
				t.Errorf("workdir %s: detail %q, want it to name the workdir", dir, d)
			}
		}
		if got := s.m.List(); len(got) != 1 {
			t.Errorf("got %d processes, want 1 (the control's)", len(got))
		}
	})
	t.Run("Coder profile", func(t *testing.T) {
		a := newCoderAgentWith(t, mopts, httpapi.WithSandbox(nil))
		out := a.waitExit(a.mustStart(cStartRequest{Command: "echo x > f2", WorkDir: ws}, ""))
		if _, err := os.Stat(filepath.Join(ws, "f2")); err != nil {
			t.Fatalf("control: %v (output %q), want the write in the workspace to land", err, out.Output)
		}
		for _, dir := range refused {
			code, resp, e := a.start(cStartRequest{Command: "echo x > f", WorkDir: dir}, "")
			if code != http.StatusForbidden || !strings.Contains(e.Detail, "workdir") {
				t.Errorf("workdir %s: %d %+v %+v, want 403 naming the workdir", dir, code, resp, e)
			}
		}
	})
	wantNothingIn(t, outside)
}
