package agentproc_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// row12Credentials are the files issue 37 (row 12) read from inside
// WorkspaceSandbox, the coding agents' own tokens first. They are named
// here, not only taken from the list, so that dropping one from the list
// fails the test.
var row12Credentials = []string{
	".claude/.credentials.json", ".codex/auth.json", ".gemini/oauth_creds.json",
	".config/github-copilot/hosts.json", ".config/github-copilot/apps.json",
	".cache/huggingface/token", ".pgpass", ".my.cnf", ".config/containers/auth.json",
	".s3cfg", ".config/rclone/rclone.conf", ".pulumi/credentials.json",
}

// TestSandboxHidesCredentials checks that every credential path of
// WorkspaceSandbox (row 12's among them), made as a file in a fresh home,
// is unreadable from inside the sandbox, as root and not. The control
// reads each without the sandbox.
func TestSandboxHidesCredentials(t *testing.T) {
	requireSandbox(t)
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	paths := slices.Clone(agentproc.CredentialPaths)
	for _, p := range row12Credentials {
		if !slices.Contains(paths, p) {
			t.Errorf("%s is not in the credential list", p)
			paths = append(paths, p)
		}
	}
	var cat strings.Builder
	cat.WriteString("for f in")
	for _, p := range paths {
		f := filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("CREDENTIAL-OF-"+p+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cat.WriteString(" " + shellQuote(f))
	}
	cat.WriteString(`; do cat "$f"; done; true`)
	m := newManager(t)
	control := runSandboxed(t, m, agentproc.Request{Command: cat.String(), WorkDir: ws})
	for _, p := range paths {
		if !strings.Contains(control.Text, "CREDENTIAL-OF-"+p+"\n") {
			t.Errorf("control: %s not read without the sandbox (output %q)", p, control.Text)
		}
	}
	out := runSandboxed(t, m, agentproc.Request{Command: cat.String(), WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws)})
	for _, p := range paths {
		if strings.Contains(out.Text, "CREDENTIAL-OF-"+p+"\n") {
			t.Errorf("~/%s was read inside the sandbox, want it hidden", p)
		}
	}
}
