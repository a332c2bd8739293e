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

// The seventeenth attack review's tests, unprivileged and the surfaces
// (docs/sandbox-threats.md).

// attack17uTests are the tests TestAttack17uUnprivileged re-runs as the
// unprivileged user, where Landlock is the whole of Hide.
var attack17uTests = []string{"TestAttackXDGCacheHomeCredentials", "TestAttackHuggingFaceStoredTokens", "TestAttackGeminiCLISecrets", "TestAttackChatAppSessions", "TestAttackAgentLoginFiles", "TestAttackSavedConnectionPasswords"}

// TestAttack17uUnprivileged runs the seventeenth review's tests as the
// unprivileged user.
func TestAttack17uUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	out, err := testuser.Run(t, 2*time.Minute, nil, "-test.run=^("+strings.Join(attack17uTests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, test := range attack17uTests {
		if !strings.Contains(out, "--- PASS: "+test+" ") {
			t.Errorf("as %s: got no PASS line for %s, want one\n%s", sandboxUser, test, out)
		}
	}
}

// TestAttackXDGCacheHomeCredentials: the sixteenth review hid the
// .config and .local/share entries of the credential list under
// $XDG_CONFIG_HOME and $XDG_DATA_HOME, not the .cache ones under
// $XDG_CACHE_HOME: Hugging Face's token (huggingface_hub keeps it at
// $XDG_CACHE_HOME/huggingface/token where the variable is set) and git's
// credential cache directory (its socket at
// $XDG_CACHE_HOME/git/credential/socket; a file stands in for it). A host
// with the cache moved off the home (clusters move it off the home's
// quota) let a tree read both. The control reads them unconfined. Runs as
// root and, through TestAttack17uUnprivileged, not.
func TestAttackXDGCacheHomeCredentials(t *testing.T) {
	requireSandbox(t)
	t.Setenv("HOME", t.TempDir())
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	files := map[string]string{filepath.Join(cache, "huggingface", "token"): "XDG-CACHE-HF-TOKEN\n",
		filepath.Join(cache, "git", "credential", "standin"): "XDG-CACHE-GIT-CREDENTIAL\n"}
	cmd := ""
	for p, s := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "cat " + shellQuote(p) + "; "
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for p, s := range files {
		s = strings.TrimSpace(s)
		if !strings.Contains(ctl, s) {
			t.Fatalf("control without the sandbox: got %q, want %s read", ctl, p)
		}
		if strings.Contains(out, s) {
			t.Errorf("%s was read under $XDG_CACHE_HOME: got %q, want it refused", p, out)
		}
	}
}

// TestAttackHuggingFaceStoredTokens: huggingface_hub (0.25 on) keeps
// every token a login saved, and an OAuth login's refresh token, in
// stored_tokens beside the active token; the credential list named the
// active one (.cache/huggingface/token) alone, so a tree read every saved
// token. The control reads the file unconfined. Runs as root and,
// through TestAttack17uUnprivileged, not.
func TestAttackHuggingFaceStoredTokens(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	stored := filepath.Join(home, ".cache", "huggingface", "stored_tokens")
	if err := os.MkdirAll(filepath.Dir(stored), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stored, []byte("[work]\nhf_token = HF-STORED-TOKEN\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: "cat " + shellQuote(stored), WorkDir: ws, Timeout: time.Minute}
	if ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text; !strings.Contains(ctl, "HF-STORED-TOKEN") {
		t.Fatalf("control without the sandbox: got %q, want the stored token read", ctl)
	}
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	if strings.Contains(out, "HF-STORED-TOKEN") {
		t.Errorf("Hugging Face's stored tokens were read: got %q, want the file refused", out)
	}
}

// TestAttackGeminiCLISecrets: the credential list named Gemini CLI's
// OAuth login (.gemini/oauth_creds.json) and its settings, not the API
// key its docs put in ~/.gemini/.env, nor ~/.env, which it (and aider)
// reads last, nor the OAuth tokens of its MCP and A2A servers
// (.gemini/mcp-oauth-tokens.json, a2a-oauth-tokens.json): a tree read
// all four. The control reads them unconfined. Runs as root and, through
// TestAttack17uUnprivileged, not.
func TestAttackGeminiCLISecrets(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	files := map[string]string{".gemini/.env": "GEMINI_API_KEY=GEMINI-DOTENV-KEY\n", ".env": "GEMINI_API_KEY=HOME-DOTENV-KEY\n",
		".gemini/mcp-oauth-tokens.json": `{"srv":{"accessToken":"GEMINI-MCP-OAUTH"}}` + "\n",
		".gemini/a2a-oauth-tokens.json": `{"agent":{"accessToken":"GEMINI-A2A-OAUTH"}}` + "\n"}
	cmd := ""
	for rel, s := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "cat " + shellQuote(p) + "; "
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, secret := range []string{"GEMINI-DOTENV-KEY", "HOME-DOTENV-KEY", "GEMINI-MCP-OAUTH", "GEMINI-A2A-OAUTH"} {
		if !strings.Contains(ctl, secret) {
			t.Fatalf("control without the sandbox: got %q, want %s read", ctl, secret)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s was read: got %q, want it refused", secret, out)
		}
	}
}

// TestAttackChatAppSessions: the credential list hid the browsers'
// profiles (their cookies are signed-in sessions), not the chat apps'
// that keep sessions the same way: Slack's cookie store (its `d` cookie
// is the workspace session), Discord's token in its local storage,
// Telegram Desktop's tdata (the account's keys), Signal's and Element's
// database keys, natively and in a snap. Stand-ins for each; a tree read
// all six. The control
// reads them unconfined. Runs as root and, through
// TestAttack17uUnprivileged, not.
func TestAttackChatAppSessions(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	files := map[string]string{".config/Slack/Cookies": "SLACK-D-COOKIE\n", ".config/discord/Local Storage/leveldb/000003.log": "DISCORD-TOKEN\n",
		".local/share/TelegramDesktop/tdata/key_datas": "TELEGRAM-AUTH-KEY\n", ".config/Signal/config.json": `{"key":"SIGNAL-DB-KEY"}` + "\n",
		".config/Element/config.json": `{"key":"ELEMENT-PICKLE-KEY"}` + "\n"}
	// A snap's home is a directory per revision, reached through the
	// current link.
	files["snap/telegram-desktop/1234/.local/share/TelegramDesktop/tdata/key_datas"] = "SNAPPED-TDATA-KEY\n"
	cmd := ""
	for rel, s := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "cat " + shellQuote(strings.Replace(p, "/1234/", "/current/", 1)) + "; "
	}
	if err := os.Symlink("1234", filepath.Join(home, "snap/telegram-desktop/current")); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, secret := range []string{"SLACK-D-COOKIE", "DISCORD-TOKEN", "TELEGRAM-AUTH-KEY", "SIGNAL-DB-KEY", "ELEMENT-PICKLE-KEY", "SNAPPED-TDATA-KEY"} {
		if !strings.Contains(ctl, secret) {
			t.Fatalf("control without the sandbox: got %q, want %s read", ctl, secret)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s was read: got %q, want it refused", secret, out)
		}
	}
}

// TestAttackAgentLoginFiles: coding agents' logins the credential list
// did not name: Cursor's CLI (cursor-agent keeps its OAuth tokens in
// ~/.config/cursor/auth.json on Linux), Grok's CLI (~/.grok/auth.json),
// pi (~/.pi/agent/auth.json: API keys and OAuth credentials) and Kimi
// Code (~/.kimi-code/credentials). Stand-ins for each: a tree read all
// four. The control reads them unconfined. Runs as root and, through
// TestAttack17uUnprivileged, not.
func TestAttackAgentLoginFiles(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	files := map[string]string{".config/cursor/auth.json": `{"accessToken":"CURSOR-CLI-TOKEN"}` + "\n",
		".grok/auth.json": `{"key":"GROK-CLI-SESSION"}` + "\n", ".pi/agent/auth.json": `{"anthropic":{"key":"PI-AGENT-KEY"}}` + "\n",
		".kimi-code/credentials/kimi-code.json": `{"access_token":"KIMI-CODE-TOKEN"}` + "\n"}
	cmd := ""
	for rel, s := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "cat " + shellQuote(p) + "; "
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, secret := range []string{"CURSOR-CLI-TOKEN", "GROK-CLI-SESSION", "PI-AGENT-KEY", "KIMI-CODE-TOKEN"} {
		if !strings.Contains(ctl, secret) {
			t.Fatalf("control without the sandbox: got %q, want %s read", ctl, secret)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s was read: got %q, want it refused", secret, out)
		}
	}
}

// TestAttackSavedConnectionPasswords: saved connections' secrets the
// credential list did not name: Snowflake's connections.toml (its CLI's
// and connectors' passwords and tokens; .snowsql/config, its
// predecessor's, was listed), FileZilla's site manager (passwords in
// base64), Remmina's profiles (RDP and VNC passwords, encrypted with the
// secret in remmina.pref beside them) and InfluxDB's CLI configs (API
// tokens). Stand-ins for each: a tree read all five. The control reads
// them unconfined. Runs as root and, through TestAttack17uUnprivileged,
// not.
func TestAttackSavedConnectionPasswords(t *testing.T) {
	requireSandbox(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	files := map[string]string{".snowflake/connections.toml": "[default]\npassword = \"SNOWFLAKE-PASSWORD\"\n",
		".config/filezilla/sitemanager.xml":        "<Pass encoding=\"base64\">FILEZILLA-PASS</Pass>\n",
		".local/share/remmina/group_rdp_x.remmina": "password=REMMINA-PROFILE-PASS\n", ".config/remmina/remmina.pref": "secret=REMMINA-SECRET\n",
		".influxdbv2/configs": "[default]\n  token = \"INFLUX-TOKEN\"\n"}
	cmd := ""
	for rel, s := range files {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd += "cat " + shellQuote(p) + "; "
	}
	ws := t.TempDir()
	req := agentproc.Request{Command: cmd, WorkDir: ws, Timeout: time.Minute}
	ctl := runSandboxed(t, newManager(t, agentproc.WithRedaction(false)), req).Text
	out := runSandboxed(t, newManager(t, agentproc.WithRedaction(false), agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws))), req).Text
	for _, secret := range []string{"SNOWFLAKE-PASSWORD", "FILEZILLA-PASS", "REMMINA-PROFILE-PASS", "REMMINA-SECRET", "INFLUX-TOKEN"} {
		if !strings.Contains(ctl, secret) {
			t.Fatalf("control without the sandbox: got %q, want %s read", ctl, secret)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s was read: got %q, want it refused", secret, out)
		}
	}
}
