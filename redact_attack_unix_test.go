//go:build unix

package agentproc_test

import (
	"testing"

	"github.com/agentproc/agentproc"
)

// TestRedactAttackURLPassword: the default set took a host variable's
// value only when its name looked like a secret, so `env` (or a test
// printing DATABASE_URL, the issue's own example) showed a database
// password: DATABASE_URL, REDIS_URL and the like name none. The password
// of a URL with credentials is redacted now, whatever the name, in the
// host's environment and in Request.Env. Not parallel: it sets the test
// process's environment.
func TestRedactAttackURLPassword(t *testing.T) {
	const hostPW, reqPW = "hunter2-host-pass", "s3cr3t-req-pass"
	t.Setenv("AGENTPROC_TEST_DATABASE_URL", "postgres://app:"+hostPW+"@db:5432/app?sslmode=disable")
	cmd := `printf '%s\n' "$AGENTPROC_TEST_DATABASE_URL" "$REDIS_URL"; printf 'pw=%s\n' "${REDIS_URL#*:*:}" | cut -d@ -f1`
	p := mustStart(t, newManager(t), agentproc.Request{
		Command: cmd, Env: map[string]string{"REDIS_URL": "redis://default:" + reqPW + "@cache:6379/0"},
	})
	mustWait(t, p)
	want := "postgres://app:[redacted:AGENTPROC_TEST_DATABASE_URL]@db:5432/app?sslmode=disable\n" +
		"redis://default:[redacted:REDIS_URL]@cache:6379/0\npw=[redacted:REDIS_URL]\n"
	if got := p.Output().Text; got != want {
		t.Errorf("output: got %q, want %q", got, want)
	}
}
