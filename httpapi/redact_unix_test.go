//go:build unix

package httpapi_test

import (
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// TestRedactHTTP: a secret the command prints, raw and one byte at a
// time, reaches no HTTP surface: the output snapshot and chunk (JSON),
// the page's output stream (SSE), and the process's redaction count.
func TestRedactHTTP(t *testing.T) {
	t.Parallel()
	const token = "ghp_S3cr3tT0k3nValue1234567890abcdef"
	s := newTestServer(t, []agentproc.Option{agentproc.WithSecrets(map[string]string{"GH_TOKEN": token})}, nil, httpapi.WithUI())
	ctx := testContext(t)
	c := s.client()
	id := start(t, c, httpapi.StartRequest{
		Command: `printf 'a %s b\n' "$V"; s=$V; while [ -n "$s" ]; do r=${s#?}; printf '%s' "${s%"$r"}"; s=$r; sleep 0.01; done; echo ' end'`,
		Env:     map[string]string{"V": token},
	})
	const want = "a [redacted:GH_TOKEN] b\n[redacted:GH_TOKEN] end\n"
	noLeak := func(surface, text string) {
		t.Helper()
		if strings.Contains(text, token[:6]) {
			t.Errorf("%s: got %q, holding the secret; want it redacted", surface, text)
		}
	}
	var streamed string
	s.readSSE(t, "/ui/output?id="+id, nil, func(typ, data string) bool {
		noLeak("GET /ui/output event", data)
		if typ != "output" {
			return false
		}
		ch := decodeJSON[uiChunk](t, data)
		streamed += ch.Text
		return ch.EOF
	})
	if streamed != want {
		t.Errorf("GET /ui/output: got %q, want %q", streamed, want)
	}
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true})
	if err != nil || out.Output != want {
		t.Errorf("GET /{id}/output: got %q, %v, want %q", out.Output, err, want)
	}
	var zero int64
	chunk, err := c.Output(ctx, id, httpapi.OutputOptions{Offset: &zero})
	if err != nil || chunk.Output != want {
		t.Errorf("GET /{id}/output?offset=0: got %q, %v, want %q", chunk.Output, err, want)
	}
	if r := s.raw(t, "GET", "/"+id, ""); !strings.Contains(r.body, `"redactions":2`) {
		t.Errorf("GET /{id}: got %s, want redactions 2", r.body)
	}
}
