package agentproc_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

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
	rerunAsSandboxUser(t, []string{"TestAttackEnvSetSecretsEveryOwner"}, false)
}
