package agentproc

import (
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"slices"
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

// TestRedactAttackHoldBackOracle: the stage held back a tail only when
// it could still begin a secret, until the next write. A command that
// never sees the secret could end a write with a guess at its next
// character, pause, and go on: a reader that watches the output
// (WaitOutput during the pause, OffsetAt or httpapi's ?since= after it,
// the awaiting-input Line) saw a wrong guess at once and the right one
// only after the pause, and learnt the secret a character at a time, in
// at most 64 guesses per character of a token. What is held back is now
// the run of form bytes at the end, whatever they spell: a right guess
// and a wrong one are held alike.
func TestRedactAttackHoldBackOracle(t *testing.T) {
	t.Parallel()
	s := newRedactSet(redactTestSecrets)
	secret := redactTestSecrets[0].value
	shown := func(guess string) string {
		r, out, _ := newTestRedactor(s)
		r.write([]byte("guess " + guess))
		return out.String()
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789" // in the forms
	for i := range len(secret) - 1 {
		right := shown(secret[:i+1])
		for _, c := range []byte(alphabet) {
			if other := shown(secret[:i] + string(c)); other != right {
				t.Fatalf("guess of byte %d: the right one shows %q, %q shows %q; want them alike", i, right, secret[:i]+string(c), other)
			}
		}
	}
}

// TestRedactAttackGuessOracle: a redaction is itself an answer. A command
// that prints guesses learns from where "[redacted:NAME]" appears, or
// from Info.Redactions (binary search over runs), which guess was the
// secret: a guessable secret (8 digits, a dictionary word) is found in
// seconds, since the stage scans gigabytes a second. Not caught: a
// token's entropy is what protects it (docs/redaction.md#known-limits).
func TestRedactAttackGuessOracle(t *testing.T) {
	t.Parallel()
	t.Skip("not caught: a redaction tells which guess was a secret (docs/redaction.md#known-limits)")
	s := newRedactSet([]secretEntry{{"PIN", "20261127"}})
	var in strings.Builder
	for d := 20261100; d < 20261200; d++ {
		fmt.Fprintf(&in, "%d\n", d)
	}
	got, _ := runRedact(s, []byte(in.String()), []int{1 << 20})
	before, _, ok := strings.Cut(got, "[redacted:PIN]")
	if ok {
		t.Fatalf("the guess after %q was the secret", before[len(before)-9:])
	}
}

// TestRedactAttackTransformations: forms no matcher follows. A command
// that has the secret can print it reversed, rot13, in base32, as spaced
// hex (od -tx1, xxd, hexdump -C, whose ASCII column also splits it across
// lines), in halves, with its line breaks where the matcher does not
// skip them (base64 -w 12), drawn over other text with "\r" or
// backspaces, or through a side channel (its exit code, a port number,
// timing). Not caught: redaction cannot cover every computable
// encoding; keeping the secret from the command is the sandbox's
// business (docs/redaction.md#known-limits).
func TestRedactAttackTransformations(t *testing.T) {
	t.Parallel()
	t.Skip("not caught: a command that transforms a secret on purpose (docs/redaction.md#known-limits)")
	s := newRedactSet(redactTestSecrets)
	secret := redactTestSecrets[0].value
	rev := []byte(secret)
	slices.Reverse(rev)
	rot := []byte(secret)
	for i, c := range rot {
		switch {
		case c >= 'a' && c <= 'z':
			rot[i] = 'a' + (c-'a'+13)%26
		case c >= 'A' && c <= 'Z':
			rot[i] = 'A' + (c-'A'+13)%26
		}
	}
	var spaced strings.Builder
	for _, c := range []byte(secret) {
		fmt.Fprintf(&spaced, " %02x", c)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	var wrapped strings.Builder
	for i := 0; i < len(b64); i += 12 {
		wrapped.WriteString(b64[i:min(i+12, len(b64))] + "\n")
	}
	half := len(secret) / 2
	for name, in := range map[string]string{
		"reversed":  string(rev),
		"rot13":     string(rot),
		"base32":    base32.StdEncoding.EncodeToString([]byte(secret)),
		"spaced":    spaced.String(),
		"halves":    secret[:half] + " " + secret[half:],
		"wrap 12":   wrapped.String(),
		"overwrite": strings.Repeat("x", half) + secret[half:] + "\r" + secret[:half],
	} {
		got, n := runRedact(s, []byte(in), []int{1 << 20})
		if n == 0 {
			t.Errorf("%s: got %q, not redacted", name, got)
		}
	}
}
