//go:build unix

package agentproc_test

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// redactToken is the secret the surface tests print; it reaches the
// child as $V, a name that does not look like a secret.
const redactToken = "ghp_S3cr3tT0k3nValue1234567890abcdef"

// redactPrinter prints $V raw on stdout and stderr, as base64 inside a
// longer run (standard, and URL alphabet unpadded), JSON-escaped, one
// byte at a time with pauses, in hex, split by colour codes, and as
// base64 wrapped across two lines (at 76 columns, 9 and 39 characters of
// its core on either side).
const redactPrinter = `printf 'raw %s end\n' "$V"
printf '%s' "$V" | od -An -v -tx1 | tr -d ' \n'; echo ' hex end'
a=${V#????????}; printf 'c %s\033[1;31m%s\033[0m end\n' "${V%"$a"}" "$a"
printf '%050d%s' 0 "$V" | base64
printf 'err %s end\n' "$V" >&2
printf 'user:%s' "$V" | base64
printf 'xy%s' "$V" | base64 | tr '+/' '-_' | tr -d '='
printf 'json {"t":"%s"}\n' "$V"
s=$V; while [ -n "$s" ]; do r=${s#?}; printf '%s' "${s%"$r"}"; s=$r; sleep 0.01; done; echo ' slow end'`

// redactPrinterCount is how many secrets redactPrinter prints.
const redactPrinterCount = 9

// redactShown is text as a terminal shows it, lines joined: colour codes
// and line breaks inside a form do not hide it from requireNoLeak.
var redactShown = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]|\r?\n")

// requireNoLeak fails if text holds any form of secret, also across
// escape sequences and line breaks.
func requireNoLeak(t *testing.T, surface, text, secret string) {
	t.Helper()
	shown := redactShown.ReplaceAllString(text, "")
	for _, f := range agentproc.SecretForms(secret) {
		if strings.Contains(text, f) || strings.Contains(shown, f) {
			t.Fatalf("%s: got %q, holding the secret as %q; want it redacted", surface, text, f)
		}
	}
}

// followAll reads p's output chunk by chunk until EOF, checking each
// chunk for leaks as it arrives, and returns what the chunks held.
func followAll(t *testing.T, p *agentproc.Process, secret string) string {
	t.Helper()
	var out strings.Builder
	for _, c := range followChunks(t, p, secret) {
		out.WriteString(c.Data)
	}
	return out.String()
}

// followChunks is followAll returning the chunks themselves. A reader
// slower than the process under head and tail limits gets chunks with
// Omitted bytes (the dropped middle): each chunk still holds only
// redacted text.
func followChunks(t *testing.T, p *agentproc.Process, secret string) []agentproc.Chunk {
	t.Helper()
	ctx := testContext(t)
	var chunks []agentproc.Chunk
	var next int64
	for {
		c, err := p.WaitOutput(ctx, next)
		if err != nil {
			t.Fatalf("WaitOutput: %v; chunks so far %v", err, chunks)
		}
		requireNoLeak(t, "WaitOutput chunk", c.Data, secret)
		// Nothing of the secret is released before all of it is seen:
		// not even its first bytes.
		if strings.Contains(c.Data, secret[:6]) {
			t.Fatalf("chunk %q holds the start of the secret", c.Data)
		}
		chunks = append(chunks, c)
		if c.EOF {
			return chunks
		}
		next = c.Next
	}
}

// TestRedactSurfaces: a secret printed in every form, on stdout and
// stderr, and one byte at a time, is redacted on every surface of an
// attached process: WaitOutput chunks, Output (head and tail), PlainText,
// WaitMatch, the output log on disk, and Info.Redactions counts it.
func TestRedactSurfaces(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	m := newManager(t, agentproc.WithSecrets(map[string]string{"GH_TOKEN": redactToken}),
		agentproc.WithOutputLog(logDir, 0), agentproc.WithOutputLimits(64, 64, 0))
	p := mustStart(t, m, agentproc.Request{Command: redactPrinter, Env: map[string]string{"V": redactToken}})
	chunks := followChunks(t, p, redactToken)
	info := mustWait(t, p)
	var b strings.Builder
	var omitted int64
	for _, c := range chunks {
		b.WriteString(c.Data)
		omitted += c.Omitted
	}
	followed := b.String()
	log, err := os.ReadFile(info.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	// The log on disk holds every byte; the chunks hold the same bytes at
	// the same offsets, less the middle the head and tail limits dropped
	// when the reader fell behind (under load).
	for _, c := range chunks {
		if end := c.Offset + int64(len(c.Data)); end > int64(len(log)) || string(log[c.Offset:end]) != c.Data {
			t.Errorf("chunk at %d: got %q, want what the log holds there (log %q)", c.Offset, c.Data, log)
		}
	}
	requireNoLeak(t, "output log", string(log), redactToken)
	for _, want := range []string{"raw [redacted:GH_TOKEN] end\n", "err [redacted:GH_TOKEN] end\n",
		`json {"t":"[redacted:GH_TOKEN]"}`, "[redacted:GH_TOKEN] slow end\n"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("output log: got %q, want it to contain %q", log, want)
		}
	}
	if got := strings.Count(string(log), "[redacted:GH_TOKEN]"); got != redactPrinterCount || info.Redactions != redactPrinterCount {
		t.Errorf("redactions: got %d in the log and Info.Redactions %d, want %d", got, info.Redactions, redactPrinterCount)
	}
	if omitted == 0 && followed != string(log) {
		t.Errorf("followed output: got %q, want what the log holds, %q", followed, log)
	}
	out := p.Output()
	requireNoLeak(t, "Output (head and tail)", out.Text, redactToken)
	if out.Truncated == nil {
		t.Errorf("Output.Truncated: got nil, want the head/tail limits to apply")
	}
	requireNoLeak(t, "Output(Plain)", p.Output(agentproc.Plain).Text, redactToken)
	for off := int64(0); ; {
		c, err := p.Read(off)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		requireNoLeak(t, "Read chunk", c.Data, redactToken)
		if c.EOF || c.Next == off {
			break
		}
		off = c.Next
	}
	requireNoLeak(t, "PlainText", agentproc.PlainText(followed), redactToken)
	line, err := p.WaitMatch(testContext(t), regexp.MustCompile(`slow end`))
	if err != nil || line != "[redacted:GH_TOKEN] slow end" {
		t.Errorf("WaitMatch: got %q, %v, want %q", line, err, "[redacted:GH_TOKEN] slow end")
	}
}

// TestRedactTTY: through a terminal (CR LF, colour codes around the
// secret) the secret is redacted and the codes kept.
func TestRedactTTY(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithSecrets(map[string]string{"GH_TOKEN": redactToken}))
	p := mustStart(t, m, agentproc.Request{
		Command: `printf '\033[31m%s\033[0m\n' "$V"; printf 'x%s' "$V" | base64`,
		Env:     map[string]string{"V": redactToken}, TTY: &agentproc.TTYSize{Rows: 24, Cols: 80},
	})
	followed := followAll(t, p, redactToken)
	if info := mustWait(t, p); info.Redactions != 2 {
		t.Errorf("Info.Redactions: got %d, want 2", info.Redactions)
	}
	if want := "\x1b[31m[redacted:GH_TOKEN]\x1b[0m\r\n"; !strings.HasPrefix(followed, want) {
		t.Errorf("TTY output: got %q, want it to start with %q", followed, want)
	}
}

// TestRedactRequestSecrets: Request.Secrets are redacted and not put in
// the environment; Request.Env values whose names look like secrets are
// redacted too; WithRedaction(false) turns all of it off.
func TestRedactRequestSecrets(t *testing.T) {
	t.Parallel()
	const mine, envTok = "my-own-secret-value", "env-token-value-42"
	req := agentproc.Request{
		Command: `env | grep -c MINE; printf '%s\n' 'my-own-secret-value'; printf 'tok=%s\n' "$API_TOKEN"`,
		Env:     map[string]string{"API_TOKEN": envTok},
		Secrets: map[string]string{"MINE": mine},
	}
	p := mustStart(t, newManager(t), req)
	followed := followAll(t, p, mine)
	if want := "0\n[redacted:MINE]\ntok=[redacted:API_TOKEN]\n"; followed != want {
		t.Errorf("output: got %q, want %q", followed, want)
	}
	off := mustStart(t, newManager(t, agentproc.WithRedaction(false),
		agentproc.WithSecrets(map[string]string{"GH_TOKEN": redactToken})), req)
	mustWait(t, off)
	if got, want := off.Output().Text, "0\n"+mine+"\ntok="+envTok+"\n"; got != want {
		t.Errorf("WithRedaction(false): got %q, want %q", got, want)
	}
	if n := off.Info().Redactions; n != 0 {
		t.Errorf("WithRedaction(false): Info.Redactions got %d, want 0", n)
	}
}

// TestRedactInvalidSecrets: a bad name or value fails Start with
// ErrInvalidRequest naming the secret and never showing its value.
func TestRedactInvalidSecrets(t *testing.T) {
	t.Parallel()
	bad := map[string]string{"SHORT": "s3cr3t!"}
	m := newManager(t, agentproc.WithSecrets(bad))
	_, err := m.Start(testContext(t), agentproc.Request{Command: "true"})
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), `"SHORT"`) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("WithSecrets with a 7-byte value: got %v, want ErrInvalidRequest naming SHORT without its value", err)
	}
	_, err = newManager(t).Start(testContext(t), agentproc.Request{Command: "true", Secrets: map[string]string{"": "12345678"}})
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), "empty secret name") {
		t.Errorf("Request.Secrets with an empty name: got %v, want ErrInvalidRequest", err)
	}
}

// TestRedactHostEnvDefault: by default the host's secret-looking
// variables are redacted, sandboxed or not; WithRedaction(false) shows
// them. Not parallel: it sets the test process's environment.
func TestRedactHostEnvDefault(t *testing.T) {
	t.Setenv("AGENTPROC_TEST_API_TOKEN", "host-token-value-1234")
	t.Setenv("AGENTPROC_TEST_SHORT_TOKEN", "short")
	cmd := `printf '%s %s\n' "$AGENTPROC_TEST_API_TOKEN" "$AGENTPROC_TEST_SHORT_TOKEN"`
	p := mustStart(t, newManager(t), agentproc.Request{Command: cmd})
	mustWait(t, p)
	if got, want := p.Output().Text, "[redacted:AGENTPROC_TEST_API_TOKEN] short\n"; got != want {
		t.Errorf("default: got %q, want %q", got, want)
	}
	p = mustStart(t, newManager(t, agentproc.WithRedaction(false)), agentproc.Request{Command: cmd})
	mustWait(t, p)
	if got, want := p.Output().Text, "host-token-value-1234 short\n"; got != want {
		t.Errorf("WithRedaction(false): got %q, want %q", got, want)
	}
}
