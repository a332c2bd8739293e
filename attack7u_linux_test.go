package agentproc_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Tests of the seventh attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Seventh attack review (unprivileged and the
// surfaces)".

// attack7Secret is a secret a tree holds in its environment; lower case,
// as a host name reaches the proxy.
const attack7Secret = "q7x2k9p4m1z8w3r6t5y0"

// TestAttackDenialRuleCarriesSecret: a NetworkHosts tree opens a CONNECT
// to an allowed host and sends a TLS ClientHello whose server name is a
// secret of its environment. The proxy refuses it with a Rule naming the
// server name ("the TLS server name differs from the CONNECT target
// (SECRET.example.com)"). addDenial redacted a denial's Target but not its
// Rule, and Info.Denials, EventDenied, httpapi's JSON and llmtool's
// "blocked:" section (the model's input) print the Rule as it is: the
// secret reached the model past redaction, which replaced it in the
// tree's output. The control: the tree holds the secret (its output shows
// it redacted) and the Rule names the server name it sent.
func TestAttackDenialRuleCarriesSecret(t *testing.T) {
	requireHosts(t)
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	registryReachable(t, allowedHost)
	m := newManager(t)
	sb := hostsSandbox(t, allowedHost)
	// The server name is the secret twice, the second time upper case:
	// DNS names compare without case, so redaction must too.
	sni := attack7Secret + "." + strings.ToUpper(attack7Secret) + ".example.com"
	req := hostsRequest(t, sb, `printf 'token %s\n' "$API_TOKEN"; `+
		`echo | openssl s_client -proxy "${HTTPS_PROXY#http://}" -connect `+allowedHost+`:443 -servername "$API_TOKEN.$(printf %s "$API_TOKEN" | tr a-z A-Z).example.com" >/dev/null 2>&1; true`)
	req.Env = map[string]string{"API_TOKEN": attack7Secret}
	req.Timeout = 60 * time.Second
	out := runSandboxed(t, m, req)
	if got := out.Text; !strings.Contains(got, "token [redacted:API_TOKEN]") {
		t.Fatalf("control: stdout got %q, want the secret redacted (the tree holds it)", got)
	}
	var rules []string
	for _, d := range out.Denials {
		rules = append(rules, d.Rule)
		if strings.Contains(strings.ToLower(d.Rule+d.Target), attack7Secret) {
			t.Errorf("denial: got %+v, want the secret redacted in its Rule and Target", d)
		}
	}
	want := "the TLS server name differs from the CONNECT target ([redacted:API_TOKEN].[redacted:API_TOKEN].example.com)"
	if len(rules) != 1 || rules[0] != want {
		t.Errorf("denial rules: got %q, want [%q] (sent server name %s)", rules, want, sni)
	}
}

// TestAttack7uUnprivileged re-runs this review's root-package tests as the
// unprivileged test user, where the tree is held by Landlock and seccomp
// alone.
func TestAttack7uUnprivileged(t *testing.T) {
	tests := []string{"TestAttackDenialRuleCarriesSecret"}
	out, err := runAsSandboxUser(t, 5*time.Minute, "-test.run=^("+strings.Join(tests, "|")+")$")
	if err != nil {
		t.Fatalf("as %s: %v\n%s", sandboxUser, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(out, "--- PASS: "+name+" ") && !strings.Contains(out, "--- SKIP: "+name+" ") {
			t.Errorf("as %s: got no PASS or SKIP line for %s, want one\n%s", sandboxUser, name, out)
		}
	}
}
