//go:build unix

package agentproc_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
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

// ownerToken is a secret-looking value of i, the same length for each.
func ownerToken(i int) string { return fmt.Sprintf("own%03dTokenQx7Zr9Wk", i) }

// Owners are bounded too: a client that spreads values over many owners
// (the owner is its header without httpapi.WithAuthorize) leaves at most
// MaxOwnerSets sets with values and MaxAllOwnersSecretBytes of them; the
// least recently used are dropped (their owner's next Start makes a fresh
// set), an owner's empty set goes at its process's exit, and an owner
// whose process runs keeps its set however old.
func TestRedactOwnerSetsBounded(t *testing.T) {
	// Each bound alone: three sets, or three values' bytes.
	t.Run("sets", func(t *testing.T) { testRedactOwnerSetsBounded(t, 3, 1<<20) })
	t.Run("bytes", func(t *testing.T) { testRedactOwnerSetsBounded(t, 100, 3*len(ownerToken(0))) })
}

func testRedactOwnerSetsBounded(t *testing.T, maxSets, maxBytes int) {
	m := newManager(t)
	agentproc.SetAllOwnersSecretBound(m, maxSets, maxBytes)
	held := mustStart(t, m.Scope("held"), agentproc.Request{Env: map[string]string{"API_TOKEN": ownerToken(99)},
		Command: `read line; echo "got $line"`, Stdin: true})
	t.Cleanup(func() { _, _ = held.Stop(testContext(t)) })
	const owners = 12
	for i := range owners {
		mustWait(t, mustStart(t, m.Scope(fmt.Sprint("owner", i)), agentproc.Request{Env: map[string]string{"API_TOKEN": ownerToken(i)}, Command: "true"}))
		if _, valued, bytes := agentproc.OwnerSets(m); valued > 3 || bytes > 3*len(ownerToken(0)) {
			t.Fatalf("after %d owners: got %d sets of %d bytes with values, want at most 3 of %d", i+1, valued, bytes, 3*len(ownerToken(0)))
		}
	}
	mustWait(t, mustStart(t, m.Scope("empty"), agentproc.Request{Command: "true"}))
	if kept, _, _ := agentproc.OwnerSets(m); kept != 3 {
		t.Errorf("after an owner without values exited: got %d sets kept, want 3 (its empty set dropped)", kept)
	}
	echo := func(owner string, i int) string {
		p := mustStart(t, m.Scope(owner), agentproc.Request{Command: "echo " + ownerToken(i)})
		mustWait(t, p)
		return strings.TrimSpace(p.Output().Text)
	}
	if got := echo(fmt.Sprint("owner", owners-1), owners-1); got != "[redacted:API_TOKEN]" {
		t.Errorf("the most recent owner's next process got %q, want its value redacted (its set kept)", got)
	}
	if got := echo("owner0", 0); got != ownerToken(0) {
		t.Errorf("the least recent owner's next process got %q, want its value shown (its set dropped, a fresh one made)", got)
	}
	if got := echo("held", 99); got != "[redacted:API_TOKEN]" {
		t.Errorf("the owner whose process runs: its next process got %q, want its value redacted (its set kept)", got)
	}
	if _, err := held.WriteStdin(testContext(t), []byte(ownerToken(99)+"\n")); err != nil {
		t.Fatalf("WriteStdin: %v", err)
	}
	mustWait(t, held)
	if got := strings.TrimSpace(held.Output().Text); got != "got [redacted:API_TOKEN]" {
		t.Errorf("the running holder's own stream got %q, want its value redacted", got)
	}
}

// Past the bound of all owners' sets, when every set holds values a
// running process carries, a Start with values is refused with
// ErrInvalidRequest naming the bounds and never the value; a Start
// without values is taken, and so is the refused one once a holder exits.
func TestRedactOwnerSetsRefusal(t *testing.T) {
	m := newManager(t)
	agentproc.SetAllOwnersSecretBound(m, 2, 1<<20)
	var holders []*agentproc.Process
	for i := range 2 {
		p := mustStart(t, m.Scope(fmt.Sprint("holder", i)), agentproc.Request{Env: map[string]string{"API_TOKEN": ownerToken(i)},
			Command: "read line", Stdin: true})
		t.Cleanup(func() { _, _ = p.Stop(testContext(t)) })
		holders = append(holders, p)
	}
	more := agentproc.Request{Env: map[string]string{"API_TOKEN": ownerToken(7)}, Command: "true"}
	_, err := m.Scope("third").Start(testContext(t), more)
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), "MaxOwnerSets 2") || !strings.Contains(err.Error(), "MaxAllOwnersSecretBytes") {
		t.Fatalf("a third owner's Start with a value while two holders run: got %v, want ErrInvalidRequest naming MaxOwnerSets and MaxAllOwnersSecretBytes", err)
	}
	if strings.Contains(err.Error(), ownerToken(7)) {
		t.Errorf("the refusal %q names the value, want its count and bytes only", err)
	}
	mustWait(t, mustStart(t, m.Scope("third"), agentproc.Request{Command: "true"}))
	if err := holders[0].CloseStdin(testContext(t)); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	mustWait(t, holders[0])
	mustWait(t, mustStart(t, m.Scope("third"), more))
}

// A value that is also the Manager's (WithSecrets, an earlier request's
// Request.Secrets, this request's own) is not stored in the owner's set
// nor counted against its bound: every stream redacts it already.
func TestRedactOwnerSetSkipsManagersValues(t *testing.T) {
	hostValue, reqValue, ownValue := ownerToken(1), ownerToken(2), ownerToken(3)
	m := newManager(t, agentproc.WithSecrets(map[string]string{"HOST_KEY": hostValue}))
	agentproc.SetOwnerSecretBound(m, 1, 1<<20)
	a := m.Scope("alice")
	held := mustStart(t, a, agentproc.Request{Env: map[string]string{"API_TOKEN": ownerToken(0)}, Command: "read line", Stdin: true})
	t.Cleanup(func() { _, _ = held.Stop(testContext(t)) })
	mustWait(t, mustStart(t, m.Scope("bob"), agentproc.Request{Secrets: map[string]string{"BOB_KEY": reqValue}, Command: "true"}))
	p := mustStart(t, a, agentproc.Request{Env: map[string]string{"X_TOKEN": hostValue, "Y_TOKEN": reqValue, "Z_TOKEN": ownValue},
		Secrets: map[string]string{"OWN_KEY": ownValue}, Command: "echo $X_TOKEN $Y_TOKEN $Z_TOKEN"})
	mustWait(t, p)
	if got, want := strings.TrimSpace(p.Output().Text), "[redacted:HOST_KEY] [redacted:BOB_KEY] [redacted:OWN_KEY]"; got != want {
		t.Errorf("output got %q, want %q", got, want)
	}
	if _, _, bytes := agentproc.OwnerSets(m); bytes != len(ownerToken(0)) {
		t.Errorf("the owners' sets hold %d bytes, want %d: the held value only, not the Manager's again", bytes, len(ownerToken(0)))
	}
}

// The heap a client can fill by spreading long values over owners stays
// bounded: past three owners' worth of bytes, each new owner's set
// replaces the least recently used one (about 2.4 MiB of heap for one
// value of 8,000 random letters: 24 MiB after ten owners without the
// bound of all sets).
func TestRedactOwnerSetsHeapBounded(t *testing.T) {
	const size, owners = 8000, 10
	m := newManager(t)
	agentproc.SetAllOwnersSecretBound(m, agentproc.MaxOwnerSets, 3*size)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	rng := rand.New(rand.NewPCG(16, 16))
	value := func() string {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	before := heap()
	var third uint64
	for i := range owners {
		mustWait(t, mustStart(t, m.Scope(fmt.Sprint("owner", i)), agentproc.Request{Env: map[string]string{"API_TOKEN": value()}, Command: "true"}))
		if i == 2 {
			third = heap() - min(before, heap())
		}
	}
	last := heap() - min(before, heap())
	t.Logf("heap grown after 3 owners %d KiB, after %d %d KiB", third>>10, owners, last>>10)
	if last > third+third/2 {
		t.Errorf("the heap grew %d KiB after 3 owners and %d KiB after %d, want the last within half again of the first: all owners' sets are bounded",
			third>>10, last>>10, owners)
	}
}
