package agentproc_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// linkTree makes a workspace with a real directory (ws/real), a link to a
// directory outside (ws/link -> outside) and a link to the workspace's
// parent (ws/real/up -> ../..), and checks, as the control, that without a
// sandbox a write through ws/link lands outside.
func linkTree(t *testing.T, m *agentproc.Manager) (ws, outside string) {
	t.Helper()
	ws, outside = t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(ws, "real", "up")); err != nil {
		t.Fatal(err)
	}
	p := mustStart(t, m, agentproc.Request{Command: "echo x > link/control", WorkDir: ws, Sandbox: nil})
	if info := mustWait(t, p); exitCode(info) != 0 {
		t.Fatalf("control: unconfined write through the link: exit %d, %q", exitCode(info), p.Output().Text)
	}
	if err := os.Remove(filepath.Join(outside, "control")); err != nil {
		t.Fatalf("control: got %v, want the unconfined write to have landed outside", err)
	}
	return ws, outside
}

// TestSandboxLinksDoNotWiden is row 1 of issue 37: a path that resolves
// outside the operator's Write (a link, a link in an intermediate
// component, ".." after a link) is refused by Narrow and InWrite with the
// error of a path written outside, and a directory swapped for a link
// after the check is refused when Start grants it; nothing is written
// outside.
func TestSandboxLinksDoNotWiden(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	m := newManager(t)
	ws, outside := linkTree(t, m)
	base := agentproc.WorkspaceSandbox(ws)
	lexical := filepath.Join(ws, "..", filepath.Base(outside))
	_, lexErr := base.Narrow(&agentproc.Sandbox{Write: []string{lexical}})
	if !errors.Is(lexErr, agentproc.ErrSandboxLoosened) {
		t.Fatalf("Narrow of a path written outside: got %v, want ErrSandboxLoosened", lexErr)
	}
	for _, p := range []string{
		filepath.Join(ws, "link"),
		filepath.Join(ws, "link", "sub"),             // the link in an intermediate component
		filepath.Join(ws, "link") + "/../x",          // ".." applies to the link's target
		filepath.Join(ws, "real") + "/up/" + "other", // a relative link to ".."
		filepath.Join(ws, "real", "up"),
		lexical,
	} {
		if base.InWrite(p) {
			t.Errorf("InWrite(%q) = true, want false: it resolves outside %s", p, ws)
		}
		_, err := base.Narrow(&agentproc.Sandbox{Write: []string{p}})
		if !errors.Is(err, agentproc.ErrSandboxLoosened) || strings.Replace(err.Error(), p, lexical, 1) != lexErr.Error() {
			t.Errorf("Narrow(Write %q): got %v, want %v with the path swapped", p, err, lexErr)
		}
		_, err = (&agentproc.Sandbox{Read: []string{ws}}).Narrow(&agentproc.Sandbox{Read: []string{p}})
		if !errors.Is(err, agentproc.ErrSandboxLoosened) {
			t.Errorf("Narrow(Read %q): got %v, want ErrSandboxLoosened", p, err)
		}
	}
	for _, p := range []string{filepath.Join(ws, "real"), filepath.Join(ws, "real") + "/up/" + filepath.Base(ws) + "/real"} {
		if !base.InWrite(p) {
			t.Errorf("InWrite(%q) = false, want true", p)
		}
	}
	// The narrowed policy holds the resolved path.
	got, err := base.Narrow(&agentproc.Sandbox{Write: []string{filepath.Join(ws, "real", "up", filepath.Base(ws), "real")}})
	if err != nil || len(got.Write) != 1 || got.Write[0] != filepath.Join(ws, "real") {
		t.Errorf("Narrow of a path through a link back inside: got %+v, %v; want Write [%s]", got, err, filepath.Join(ws, "real"))
	}

	// A link swapped in between the check and the grant: the Write path
	// and the work dir each passed as a real directory, then became a
	// link to outside; Start refuses them with the check's error.
	swap := func(name string) string {
		t.Helper()
		d := filepath.Join(ws, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dw, dd := swap("w"), swap("d")
	narrowed, err := base.Narrow(&agentproc.Sandbox{Write: []string{dw}})
	if err != nil {
		t.Fatal(err)
	}
	itself, err := base.Narrow(nil)
	if err != nil || !base.InWrite(dd) {
		t.Fatalf("checks of real directories: %v, InWrite %v; want them to pass", err, base.InWrite(dd))
	}
	for _, d := range []string{dw, dd} {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		req  agentproc.Request
	}{
		{"Write", agentproc.Request{Command: "echo x > " + shellQuote(filepath.Join(dw, "f")), WorkDir: ws, Sandbox: narrowed}},
		{"work dir", agentproc.Request{Command: "echo x > f", WorkDir: dd, Sandbox: itself}},
	} {
		p, err := m.Start(testContext(t), c.req)
		if err == nil {
			mustWait(t, p)
			t.Errorf("%s swapped for a link after the check: started (output %q), want ErrSandboxLoosened", c.name, p.Output().Text)
		} else if !errors.Is(err, agentproc.ErrSandboxLoosened) || !strings.Contains(err.Error(), "is not inside the base policy's Write") {
			t.Errorf("%s swapped for a link after the check: got %v, want ErrSandboxLoosened", c.name, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("%d entries written outside, want none", len(ents))
	}
	// The Manager's default work dir is the operator's choice, not held.
	m2 := newManager(t, agentproc.WithWorkDir(func() string { return outside }))
	p, err := m2.Start(testContext(t), agentproc.Request{Command: "true", Sandbox: itself})
	if err != nil {
		t.Fatalf("default work dir outside a narrowed policy: %v, want it to start", err)
	}
	mustWait(t, p)
}

// TestWorkDirDotDotAfterLink checks that a work dir's ".." is applied
// where the kernel applies it, to a link's target, so that the directory a
// command runs in is the one Sandbox.InWrite checked: ws/link/../x is x
// beside the link's target, not ws/x.
func TestWorkDirDotDotAfterLink(t *testing.T) {
	t.Parallel()
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, filepath.Base(outside)), 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "pwd -P", WorkDir: filepath.Join(ws, "link") + "/../" + filepath.Base(outside)})
	mustWait(t, p)
	if got := strings.TrimSpace(p.Output().Text); got != outside || p.Info().WorkDir != outside {
		t.Errorf("ran in %q (Info.WorkDir %q), want %q", got, p.Info().WorkDir, outside)
	}
}
