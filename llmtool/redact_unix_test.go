//go:build unix

package llmtool_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestRedactToolResults: a secret the command prints, raw, as base64 and
// one byte at a time, reaches the model through no tool result: execute,
// process_output and process_wait show only [redacted:NAME].
func TestRedactToolResults(t *testing.T) {
	t.Parallel()
	const token = "ghp_S3cr3tT0k3nValue1234567890abcdef"
	tb := newToolbox(t, agentproc.WithSecrets(map[string]string{"GH_TOKEN": token}))
	cmd := `printf 'a %s b\n' ` + token + `; printf 'x%s' ` + token + ` | base64; s=` + token +
		`; while [ -n "$s" ]; do r=${s#?}; printf '%s' "${s%"$r"}"; s=$r; sleep 0.01; done; echo ' end'`
	res := dispatch(t, tb, "execute", fmt.Sprintf(`{"command": %q, "run_in_background": true}`, cmd))
	id := field(res, "process_id")
	wait := dispatch(t, tb, "process_wait", fmt.Sprintf(`{"process_id": %q, "pattern": "end$"}`, id))
	out := dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "wait": true}`, id))
	for name, r := range map[string]string{"execute": res, "process_wait": wait, "process_output": out} {
		if strings.Contains(r, token[:6]) || strings.Contains(r, "Z2hwX1MzY3Iz") {
			t.Errorf("%s: got %q, holding the secret; want it redacted", name, r)
		}
	}
	if !strings.Contains(out, "a [redacted:GH_TOKEN] b\n") || !strings.Contains(out, "[redacted:GH_TOKEN] end") {
		t.Errorf("process_output: got %q, want the secrets redacted and the text around them kept", out)
	}
}
