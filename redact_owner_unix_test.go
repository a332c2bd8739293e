//go:build unix

package agentproc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// A request's Env secrets go to its owner's set: owner A's secret-looking
// Env value is redacted in A's later processes' output and not in owner
// B's, so B cannot print guesses and learn from the blanks which one is
// A's (the seventh mend). Request.Secrets stay in every stream: the
// control shows A's is blanked in B's output.
func TestRedactOwnerEnvSecretScoped(t *testing.T) {
	m := newManager(t)
	a, b := m.Scope("alice"), m.Scope("bob")
	const envSecret, reqSecret = "q7Envx2aliceTokenZ9", "r8Reqy3aliceSecretW4"
	holder := mustStart(t, a, agentproc.Request{Env: map[string]string{"API_TOKEN": envSecret},
		Secrets: map[string]string{"SHARED_KEY": reqSecret}, Command: `echo "own $API_TOKEN"`})
	mustWait(t, holder)
	if got := holder.Output().Text; !strings.Contains(got, "own [redacted:API_TOKEN]") {
		t.Fatalf("control: the holder's output got %q, want its Env secret redacted", got)
	}
	guess := mustStart(t, b, agentproc.Request{Command: "echo guess " + envSecret + " " + reqSecret})
	mustWait(t, guess)
	got := guess.Output().Text
	if !strings.Contains(got, "guess "+envSecret+" ") {
		t.Errorf("another owner's output got %q, want owner alice's Env secret shown as printed (no oracle)", got)
	}
	if !strings.Contains(got, "[redacted:SHARED_KEY]") {
		t.Errorf("control: another owner's output got %q, want alice's Request.Secrets redacted in every stream", got)
	}
	again := mustStart(t, a, agentproc.Request{Command: "echo again " + envSecret})
	mustWait(t, again)
	if got := again.Output().Text; !strings.Contains(got, "again [redacted:API_TOKEN]") {
		t.Errorf("the owner's next process's output got %q, want its earlier Env secret still redacted", got)
	}
}

// Past the bound, the owner's set lets go of the least recently held
// secrets that no running process carries, and keeps those a running
// process does, however old.
func TestRedactOwnerSetLetsOldestGo(t *testing.T) {
	m := newManager(t)
	agentproc.SetOwnerSecretBound(m, 3, 1<<20)
	a := m.Scope("alice")
	secrets := []string{"s1HeldTokenAAAA1", "s2SecondTokenBBB2", "s3ThirdTokenCCCC3", "s4FourthTokenDDD4"}
	start := func(i int, command string) *agentproc.Process {
		return mustStart(t, a, agentproc.Request{Env: map[string]string{"API_TOKEN": secrets[i]}, Command: command, Stdin: true})
	}
	held := start(0, "read line") // runs until its stdin ends: it holds s1
	t.Cleanup(func() { _, _ = held.Stop(testContext(t)) })
	mustWait(t, start(1, "true"))
	mustWait(t, start(2, "true"))
	mustWait(t, start(3, "true")) // four past a bound of three: s2 goes, s1 is held
	check := mustStart(t, a, agentproc.Request{Command: "echo " + strings.Join(secrets, " ")})
	mustWait(t, check)
	want := "[redacted:API_TOKEN] " + secrets[1] + " [redacted:API_TOKEN] [redacted:API_TOKEN]"
	if got := strings.TrimSpace(check.Output().Text); got != want {
		t.Errorf("the owner's output got %q, want %q: the oldest secret no running process carries let go, the held one kept", got, want)
	}
}

// A Start is refused only when the Env secrets of the owner's running
// processes and its own pass the bound; once the holder exits, the same
// Start is taken, and another owner's never meets this owner's bound.
func TestRedactOwnerSetRefusal(t *testing.T) {
	m := newManager(t)
	agentproc.SetOwnerSecretBound(m, 2, 1<<20)
	a := m.Scope("alice")
	held := mustStart(t, a, agentproc.Request{Env: map[string]string{"A_TOKEN": "heldTokenAAAA1111", "B_TOKEN": "heldTokenBBBB2222"},
		Command: "read line", Stdin: true})
	more := agentproc.Request{Env: map[string]string{"C_TOKEN": "thirdTokenCCCC3333"}, Command: "true"}
	_, err := a.Start(testContext(t), more)
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), "MaxOwnerSecrets 2") {
		t.Fatalf("a Start past the bound while the holder runs: got %v, want ErrInvalidRequest naming MaxOwnerSecrets", err)
	}
	if strings.Contains(err.Error(), "thirdTokenCCCC3333") {
		t.Errorf("the refusal %q names the value, want its count and bytes only", err)
	}
	mustWait(t, mustStart(t, m.Scope("bob"), more))
	if err := held.CloseStdin(testContext(t)); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	mustWait(t, held)
	mustWait(t, mustStart(t, a, more))
}
