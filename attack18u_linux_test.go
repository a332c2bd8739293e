package agentproc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testuser"
)

// The eighteenth attack review's tests, unprivileged and the surfaces
// (docs/sandbox-threats.md).

// attack18uTests are the tests TestAttack18uUnprivileged re-runs as the
// unprivileged user, where Landlock is the whole of Hide.
var attack18uTests = []string{"TestAttackToolVariableCredentials"}

// TestAttack18uUnprivileged runs the eighteenth review's tests as the
// unprivileged user.
func TestAttack18uUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	out, err := testuser.Run(t, 2*time.Minute, nil, "-test.run=^("+strings.Join(attack18uTests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, test := range attack18uTests {
		if !strings.Contains(out, "--- PASS: "+test+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, test, out)
		}
	}
}

// TestAttackToolVariableCredentials: the common tools' own variables
// move their credentials out of the home ($CARGO_HOME's registry token,
// $GNUPGHOME's keys, $CODEX_HOME's and $CLAUDE_CONFIG_DIR's logins,
// $HF_HOME's token, $GH_CONFIG_DIR's login, $KUBECONFIG's and
// $AWS_SHARED_CREDENTIALS_FILE's files, $GOOGLE_APPLICATION_CREDENTIALS'
// service account key…), and WorkspaceSandbox hid the home's places only: a tree read
// each at the place the variable names. A value inside the work dir and
// one that holds the work dir are left alone (the work dir is the tree's;
// hiding a parent of it would refuse every Start), which the last Start
// shows. The control reads every file unconfined. Runs as root and,
// through TestAttack18uUnprivileged, not.
func TestAttackToolVariableCredentials(t *testing.T) {
	requireSandbox(t)
	t.Setenv("HOME", t.TempDir())
	for _, v := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "KUBECONFIG", "AWS_CONFIG_FILE", "HF_STORED_TOKENS_PATH", "PASSWORD_STORE_DIR", "RCLONE_CONFIG"} {
		t.Setenv(v, "")
	}
	tools := t.TempDir()
	in := func(p ...string) string { return filepath.Join(append([]string{tools}, p...)...) }
	files := map[string]string{}
	dirVar := func(env, dir, file string) {
		t.Setenv(env, in(dir))
		files[in(dir, file)] = strings.ToUpper(env) + "-SECRET"
	}
	dirVar("CARGO_HOME", "cargo", "credentials.toml")
	dirVar("GNUPGHOME", "gnupg", "private-keys-v1.d/key.key")
	dirVar("DOCKER_CONFIG", "docker", "config.json")
	dirVar("CODEX_HOME", "codex", "auth.json")
	dirVar("CLAUDE_CONFIG_DIR", "claude", ".credentials.json")
	files[in("claude", ".claude.json")] = "CLAUDE-JSON-OAUTH-ACCOUNT"
	dirVar("GEMINI_CLI_HOME", "gemini-home", ".gemini/oauth_creds.json")
	dirVar("HF_HOME", "hf", "token")
	dirVar("AZURE_CONFIG_DIR", "azure", "msal_token_cache.json")
	dirVar("CLOUDSDK_CONFIG", "gcloud", "credentials.db")
	dirVar("GH_CONFIG_DIR", "gh", "hosts.yml")
	dirVar("COMPOSER_HOME", "composer", "auth.json")
	dirVar("POETRY_CONFIG_DIR", "poetry", "auth.toml")
	dirVar("DOCKER_CERT_PATH", "docker-certs", "key.pem")
	for _, env := range []string{"AWS_SHARED_CREDENTIALS_FILE", "HF_TOKEN_PATH", "PGPASSFILE", "NPM_CONFIG_USERCONFIG", "NETRC",
		"TF_CLI_CONFIG_FILE", "BOTO_CONFIG", "OCI_CLI_CONFIG_FILE", "TALOSCONFIG", "GOOGLE_APPLICATION_CREDENTIALS", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		p := in("files", strings.ToLower(env))
		t.Setenv(env, p)
		files[p] = env + "-SECRET"
	}
	kube := in("kube", "a.yaml") + string(os.PathListSeparator) + in("kube", "b.yaml")
	t.Setenv("KUBECONFIG", kube)
	files[in("kube", "b.yaml")] = "KUBECONFIG-SECOND-SECRET"
	cmd := ""
	for p, s := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "cat " + shellQuote(p) + "; "
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for p, s := range files {
		if !strings.Contains(ctl, s) {
			t.Fatalf("control without the sandbox: got %q, want %s read", ctl, p)
		}
		if strings.Contains(out, s) {
			t.Errorf("%s was read at the place its variable names: got %q, want it refused", p, out)
		}
	}
	// A tool dir in the work dir, or one that holds it, is not hidden:
	// the Start succeeds and the tree reads its own work dir's file.
	inWS := filepath.Join(ws, ".cargo")
	if err := os.MkdirAll(inWS, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inWS, "credentials.toml"), []byte("WORKDIR-CARGO\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARGO_HOME", inWS)
	t.Setenv("GNUPGHOME", filepath.Dir(ws))
	req.Command = "cat .cargo/credentials.toml"
	if got := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text; !strings.Contains(got, "WORKDIR-CARGO") {
		t.Errorf("the work dir's own .cargo with $CARGO_HOME on it, $GNUPGHOME its parent: got %q, want it read", got)
	}
}
