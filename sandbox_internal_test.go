package agentproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLooksSecret(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "OPENAI_API_KEY": true, "AWS_SECRET_ACCESS_KEY": true, "PGPASSWORD": true,
		"GOOGLE_APPLICATION_CREDENTIALS": true, "SSH_AUTH_SOCK": true, "DOCKER_HOST": true, "http_auth": true,
		"npm_config__authToken": true, "KUBECONFIG": true, "AUTH": true, "XAUTHORITY": true,
		"PATH": false, "HOME": false, "GIT_AUTHOR_NAME": false, "GIT_AUTHOR_EMAIL": false, "LANG": false,
		"DATABASE_URL": false, // a password inside a URL: what the patterns miss
	} {
		if got := looksSecret(name); got != want {
			t.Errorf("looksSecret(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSandboxEnv(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=/bin", "GH_TOKEN=x", "MY_KEY=y", "KEEP_TOKEN=z", "DATABASE_URL=postgres://u:p@h", "PWD=/w", MarkerEnv + "=id", "TMPDIR=/tmp"}
	got := sandboxEnv(env, SandboxEnv{Keep: []string{"KEEP_*"}, Drop: []string{"DATABASE_URL"}, Set: map[string]string{"A": "b"}}, "/priv")
	want := []string{"PATH=/bin", "KEEP_TOKEN=z", "PWD=/w", MarkerEnv + "=id", "A=b", "TEMP=/priv", "TMP=/priv", "TMPDIR=/priv"}
	if !slices.Equal(got, want) {
		t.Errorf("sandboxEnv:\n got %q\nwant %q", got, want)
	}
	// The marker and PWD survive even a Drop that names them.
	got = sandboxEnv([]string{"PWD=/w", MarkerEnv + "=id"}, SandboxEnv{Drop: []string{"*"}}, "")
	if !slices.Equal(got, []string{"PWD=/w", MarkerEnv + "=id"}) {
		t.Errorf("Drop *: got %q, want PWD and the marker kept", got)
	}
}

// abs returns an absolute path on every OS ("/a" is not one on Windows).
func abs(p string) string { return filepath.Join(os.TempDir(), p) }

func TestSandboxValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sb    Sandbox
		field string
	}{
		{Sandbox{Write: []string{"rel"}}, "Sandbox.Write[0]"},
		{Sandbox{Read: []string{abs("a"), ""}}, "Sandbox.Read[1]"},
		{Sandbox{Hide: []string{abs("a\x00")}}, "Sandbox.Hide[0]"},
		{Sandbox{ReadOnly: []string{"x"}}, "Sandbox.ReadOnly[0]"},
		{Sandbox{Network: "wifi"}, "Sandbox.Network"},
		{Sandbox{Network: NetworkPorts}, "Sandbox.AllowPorts"},
		{Sandbox{AllowPorts: []int{80}}, "Sandbox.AllowPorts"},
		{Sandbox{Network: NetworkPorts, AllowPorts: []int{0}}, "Sandbox.AllowPorts[0]"},
		{Sandbox{Env: SandboxEnv{Keep: []string{"A=B"}}}, "Sandbox.Env.Keep[0]"},
		{Sandbox{Env: SandboxEnv{Set: map[string]string{"": "x"}}}, "Sandbox.Env.Set"},
		{Sandbox{Hide: make([]string, maxSandboxPaths+1)}, "Sandbox.Hide has 1025 paths"},
	} {
		err := c.sb.Validate()
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidRequest naming %s", c.sb, err, c.field)
		}
	}
	if err := (&Sandbox{}).Validate(); err != nil {
		t.Errorf("zero Sandbox: %v, want valid", err)
	}
	if err := WorkspaceSandbox(abs("w")).Validate(); err != nil {
		t.Errorf("WorkspaceSandbox: %v, want valid", err)
	}
	full := &Sandbox{Hide: make([]string, maxSandboxPaths)}
	for i := range full.Hide {
		full.Hide[i] = abs(fmt.Sprintf("h%d", i))
	}
	if err := full.Validate(); err != nil {
		t.Errorf("a Hide of %d paths: %v, want valid", maxSandboxPaths, err)
	}
}

func TestSandboxPolicyConflicts(t *testing.T) {
	t.Parallel()
	m := &Manager{cfg: defaultConfig()}
	w, tmp := abs("w"), abs("t")
	_, err := m.sandboxPolicyFor(&Sandbox{Hide: []string{filepath.Join(w, ".env")}}, w, "", true, false)
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "Sandbox.Hide") {
		t.Errorf("a hidden path inside the work dir: got %v, want ErrInvalidRequest naming Sandbox.Hide", err)
	}
	_, err = m.sandboxPolicyFor(&Sandbox{ReadOnly: []string{abs("elsewhere")}}, w, "", true, false)
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "Sandbox.ReadOnly") {
		t.Errorf("ReadOnly outside Write: got %v, want ErrInvalidRequest naming Sandbox.ReadOnly", err)
	}
	a, err := m.sandboxPolicyFor(WorkspaceSandbox(w), w, tmp, true, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.sandboxPolicyFor(WorkspaceSandbox(w), w, tmp, true, false)
	c, _ := m.sandboxPolicyFor(WorkspaceSandbox(w), w, tmp, true, true)
	if a.key != b.key || a.key == c.key {
		t.Errorf("policy keys: equal policies differ or a TTY one matches")
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	sep := string(filepath.Separator)
	root := filepath.VolumeName(os.TempDir()) + sep
	a := abs("a")
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{a, a, true}, {a + sep + "b", a, true}, {a + "b", a, false}, {a, root, true}, {root, root, true}, {a, a + sep + "b", false},
	} {
		if got := within(c.p, c.dir); got != c.want {
			t.Errorf("within(%q, %q) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}
}

func TestSandboxNarrow(t *testing.T) {
	t.Parallel()
	w := abs("w")
	base := &Sandbox{Write: []string{w}, Network: NetworkPorts, AllowPorts: []int{80, 443}, Hide: []string{abs("h")}}
	got, err := base.Narrow(&Sandbox{Write: []string{filepath.Join(w, "sub")}, Network: NetworkPorts, AllowPorts: []int{443}, Hide: []string{abs("h2")}, NoDefaultWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.AllowPorts, []int{443}) || !slices.Equal(got.Hide, []string{abs("h"), abs("h2")}) || !got.NoDefaultWrite || got.Network != NetworkPorts {
		t.Errorf("Narrow: got %+v", got)
	}
	for _, req := range []*Sandbox{
		{Network: NetworkPorts, AllowPorts: []int{22}},
		{Network: NetworkHost},
		{Write: []string{abs("elsewhere")}},
		{BestEffort: true},
	} {
		if _, err := base.Narrow(req); !errors.Is(err, ErrSandboxLoosened) {
			t.Errorf("Narrow(%+v): got %v, want ErrSandboxLoosened", req, err)
		}
	}
	if got, err := base.Narrow(&Sandbox{Network: NetworkNone}); err != nil || got.Network != NetworkNone || got.AllowPorts != nil {
		t.Errorf("Narrow to none: got %+v, %v", got, err)
	}
	if got, _ := (*Sandbox)(nil).Narrow(base); got == base || got.Network != NetworkPorts {
		t.Errorf("nil base: got %+v, want a copy of the request", got)
	}
}
