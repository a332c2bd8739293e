package agentproc

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// CredentialPaths is credentialPaths, for the black-box tests.
var CredentialPaths = slices.Clone(credentialPaths)

// TestLooksSecretWords checks the names issue 37 found passing the filter
// (MYSQL_PWD, DB_PASS, *_PAT, *_DSN) and the innocent names that share
// their letters, PWD first: it must never be dropped.
func TestLooksSecretWords(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"MYSQL_PWD": true, "DB_PASS": true, "SMTP_PASS": true, "GITHUB_PAT": true, "gh_pat": true,
		"AZURE_DEVOPS_EXT_PAT": true, "SENTRY_DSN": true, "DATABASE_DSN": true, "DSN": true, "PASS": true,
		"AZURE_STORAGE_CONNECTION_STRING": true, "SUPABASE_JWT_SECRET": true, "JWT": true, "NEXTAUTH_JWT": true,
		"SLACK_WEBHOOK_URL": true, "DISCORD_WEBHOOK": true, "API_BEARER": true,
		"PWD": false, "OLDPWD": false, "PATH": false, "PATHEXT": false, "MANPATH": false, "GOPATH": false,
		"PAT": false, "_PWD": false, "PASSTHROUGH": false, "NO_BYPASS": false, "PATCH_LEVEL": false,
		"DSN_LESS": true, "COMPASS_HOME": false, "PA_TH": false, "SPWD": false,
	} {
		if got := nameLooksSecret(name); got != want {
			t.Errorf("nameLooksSecret(%q) = %v, want %v", name, got, want)
		}
	}
	got := sandboxEnv([]string{"PWD=/w", "OLDPWD=/o", "PATH=/bin", "MYSQL_PWD=pw", "DB_PASS=pw", "GITHUB_PAT=p", "SENTRY_DSN=d"}, SandboxEnv{}, "")
	if want := []string{"PWD=/w", "OLDPWD=/o", "PATH=/bin"}; !slices.Equal(got, want) {
		t.Errorf("sandboxEnv: got %q, want %q", got, want)
	}
}

// TestReadmeListsCredentials checks that the README lists every path
// WorkspaceSandbox hides, as its Sandbox section says it does.
func TestReadmeListsCredentials(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(slices.Clone(credentialPaths), systemSecretPaths...) {
		if !strings.Contains(string(b), "`"+p+"`") {
			t.Errorf("the README does not list %s", p)
		}
	}
}
