package agentproc

import (
	"strings"
	"testing"
)

// Attacks on redaction: a command that wants a registered secret to
// reach the model un-redacted. Each test here was a way out; the README's
// "Redaction" section and docs/redaction.md say what is still not caught.

// renderedLeak returns a rendering of out that holds secret in any
// form, or "": PlainText of out and of every suffix and prefix of it,
// as a reader that renders output read from any offset (WaitOutput,
// httpapi's plain chunks, llmtool) sees it.
func renderedLeak(out, secret string) string {
	forms := secretForms(secret)
	for k := range len(out) + 1 {
		for _, r := range []string{PlainText(out[k:]), PlainText(out[:k])} {
			for _, f := range forms {
				if strings.Contains(r, f) {
					return r
				}
			}
		}
	}
	return ""
}

// TestRedactAttackHiddenControls: a secret split by bytes that PlainText
// removes (controls, DEL, C1 controls, a whole OSC or DCS string, a
// control sequence that ends where PlainText ends it) reached every
// rendered surface whole: llmtool, httpapi's plain output and the page
// render output with PlainText. UTF-16LE is the secret with a NUL after
// each byte. They are redacted now, from whatever offset the output is
// rendered.
func TestRedactAttackHiddenControls(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	secret := redactTestSecrets[0].value // ghp_16C7e42F292c...
	a, b := secret[:10], secret[10:]     // b starts with '2': a CSI parameter byte
	utf16 := "\xff\xfe"
	for _, c := range []byte(secret) {
		utf16 += string([]byte{c, 0})
	}
	for _, tc := range []struct{ name, in string }{
		{"BEL", a + "\a" + b},
		{"NUL", a + "\x00" + b},
		{"DEL", a + "\x7f" + b},
		{"VT FF SO", a + "\x0b\x0c\x0e" + b},
		{"C1 NEL", a + "\xc2\x85" + b},
		{"C1 CSI", a + "\xc2\x9b31m" + b},
		{"OSC BEL", a + "\x1b]0;title\a" + b},
		{"OSC ST", a + "\x1b]8;;http://x/\x1b\\" + b},
		{"DCS", a + "\x1bPq#0\x1b\\" + b},
		{"C1 OSC", a + "\xc2\x9d0;t\xc2\x9c" + b},
		{"CSI intermediate", a + "\x1b[ " + b},
		{"UTF-16LE", utf16},
		{"inside a payload", "\x1b]0;" + a + "\x01" + b + "\a"},
	} {
		for _, sizes := range [][]int{{1 << 20}, {1}, {3, 1, 7}} {
			in := "x " + tc.in + " y\n"
			got, n := runRedact(s, []byte(in), sizes)
			if r := renderedLeak(got, secret); r != "" || n == 0 {
				t.Errorf("%s in writes of %v: got %q (%d redactions), rendered %q; want the secret redacted", tc.name, sizes, got, n, r)
			}
		}
	}
}
