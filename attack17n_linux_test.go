package agentproc_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// The seventeenth attack review's tests on the redaction sets (the proxy's
// are in internal/egress/attack17n_linux_test.go; docs/sandbox-threats.md).

// TestAttackEnvSetSecretsEveryOwner: the seventh mend put a request's Env
// secrets in its owner's bounded set, but the Env.Set of the request's
// own Sandbox still went to the Manager's set, which every owner's stream
// redacts and which only grows; httpapi takes it from the client
// (sandbox.env_set, merged by Sandbox.Narrow). So one owner's env_set
// blanked the same text in another owner's output (the oracle the mend
// closed for Env), and a client grew every stream without bound. The
// request's own Env.Set now goes with its Env to its owner's set; the
// Manager's default policy's (the operator's) stays in every stream.
func TestAttackEnvSetSecretsEveryOwner(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	const operatorToken, clientSecret = "npm_Operator0123456789abcdef", "q7EnvSetx2aliceTokenZ9"
	base := agentproc.WorkspaceSandbox(ws)
	base.Env.Set = map[string]string{"NPM_TOKEN": operatorToken}
	m := newManager(t, agentproc.WithSandbox(base))
	narrow := func(set map[string]string) *agentproc.Sandbox {
		// As httpapi's sandboxFromRequest does with a client's env_set.
		sb, err := m.DefaultSandbox().Narrow(&agentproc.Sandbox{Env: agentproc.SandboxEnv{Set: set}})
		if err != nil {
			t.Fatalf("Narrow: %v", err)
		}
		return sb
	}
	a, b := m.Scope("alice"), m.Scope("bob")
	holder := mustStart(t, a, agentproc.Request{WorkDir: ws, Sandbox: narrow(map[string]string{"API_TOKEN": clientSecret}),
		Command: `echo "own $API_TOKEN"`})
	mustWait(t, holder)
	if got := holder.Output().Text; !strings.Contains(got, "own [redacted:API_TOKEN]") {
		t.Fatalf("control: the holder's output got %q, want its env_set secret redacted", got)
	}
	guess := mustStart(t, b, agentproc.Request{WorkDir: ws, Command: "echo guess " + clientSecret + " " + operatorToken})
	mustWait(t, guess)
	got := guess.Output().Text
	if !strings.Contains(got, "guess "+clientSecret+" ") {
		t.Errorf("another owner's output got %q, want owner alice's env_set secret shown as printed (no oracle)", got)
	}
	if !strings.Contains(got, "[redacted:NPM_TOKEN]") {
		t.Errorf("control: another owner's output got %q, want the operator's Env.Set redacted in every stream", got)
	}
	// The owner's bound holds env_set as it holds Env: twelve values of
	// 8,000 random letters (96,000 bytes) pass MaxOwnerSecretBytes. In the
	// Manager's set they were taken, each such Start dearer than the last.
	rng := rand.New(rand.NewPCG(17, 17))
	big := map[string]string{}
	for i := range 12 {
		v := make([]byte, 8000)
		for j := range v {
			v[j] = byte('a' + rng.IntN(26))
		}
		big[fmt.Sprintf("T%d_TOKEN", i)] = string(v)
	}
	_, err := m.Scope("carol").Start(testContext(t), agentproc.Request{WorkDir: ws, Sandbox: narrow(big), Command: "true"})
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), "MaxOwnerSecretBytes") {
		t.Errorf("a Start with 12 env_set values of 8,000 bytes: got %v, want ErrInvalidRequest naming MaxOwnerSecretBytes", err)
	}
}

// TestAttack17nUnprivileged runs the env_set test again as the
// unprivileged test user, where the Manager has no root.
func TestAttack17nUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	rerunAsSandboxUser(t, []string{"TestAttackEnvSetSecretsEveryOwner", "TestAttackNetworkHostTreeUsesAnotherTreesListener"}, false)
}

// TestAttackNetworkHostTreeUsesAnotherTreesListener: without root a
// NetworkHosts tree's listener is on the host's loopback, and the proxy
// token was the Manager's. A NetworkHosts tree of one owner writes
// $HTTPS_PROXY to a file; a NetworkHost tree, which reaches the host's
// loopback whole, reads it and sends a CONNECT to another owner's tree's
// listener (the token opens every listener of the Manager): a denial the
// victim never caused lands in its Info, and the same way in could stall
// tunnels against its UnreadBudget. Closed by a token a tree (hosts.go,
// hostsRun.token): the leaked one opens only its own tree's listener,
// gone with it. The control: the NetworkHost tree reached the victim's
// listener (a 407 from it, not a failed connection). Runs as the
// unprivileged user only (TestAttack17nUnprivileged).
func TestAttackNetworkHostTreeUsesAnotherTreesListener(t *testing.T) {
	requireHosts(t)
	if os.Geteuid() == 0 {
		t.Skip("the listener is on the host's loopback without root alone (TestAttack17nUnprivileged)")
	}
	m := newManager(t)
	victimSb := hostsSandbox(t, "allowed.example")
	victim := hostsRequest(t, victimSb, `echo "port ${HTTPS_PROXY##*:}"; read x`)
	victim.Stdin = true
	v := mustStart(t, m.Scope("bob"), victim)
	defer func() { _, _ = v.Stop(testContext(t)) }()
	port := waitForOutput(t, v, regexp.MustCompile(`port (\d+)`))[1]
	leakSb := hostsSandbox(t, "allowed.example")
	ws := leakSb.Write[0]
	mustWait(t, mustStart(t, m.Scope("alice"), hostsRequest(t, leakSb, `printf '%s\n' "$HTTPS_PROXY" > proxy.txt`)))
	hostSb := agentproc.WorkspaceSandbox(ws)
	hostSb.Network = agentproc.NetworkHost
	a := mustStart(t, m.Scope("alice"), agentproc.Request{WorkDir: ws, Sandbox: hostSb, Timeout: time.Minute,
		Command: `p=$(sed 's/:[0-9]*$/:` + port + `/' proxy.txt); curl -s -o /dev/null -w 'code %{http_code} connect %{http_connect}\n' -x "$p" https://notlisted-by-alice.example/; true`})
	mustWait(t, a)
	out := a.Output().Text
	t.Logf("the NetworkHost tree: %q", out)
	if !strings.Contains(out, "connect 407") {
		t.Errorf("control: the NetworkHost tree got %q, want the victim's listener reached and its token refused (407)", out)
	}
	for _, d := range v.Info().Denials {
		if strings.Contains(d.Target, "notlisted-by-alice") {
			t.Errorf("the victim's Info holds the denial %+v, which another owner's tree caused through its listener", d)
		}
	}
}
