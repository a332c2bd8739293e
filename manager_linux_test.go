package agentproc_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestPWDNamesWorkDir checks that the environment a child starts with has
// PWD naming the directory it starts in, not the host's: a shell would find
// the host's stale and look the directory up again. It reads the
// environment the shell was executed with from /proc (a shell rewrites its
// own PWD, so asking it would prove nothing).
func TestPWDNamesWorkDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newManager(t)
	// The shell says when it runs: Start returns once the command is
	// started, which on a loaded machine can be before the shell's own
	// environment is the one /proc shows.
	p := mustStart(t, m, agentproc.Request{Command: `echo up; read x`, WorkDir: dir, Stdin: true})
	waitForOutput(t, p, regexp.MustCompile(`up`))
	env, err := agentproc.ProcFile(p.Info().PID, "environ")
	if err != nil {
		t.Fatal(err)
	}
	var pwd []string
	for kv := range strings.SplitSeq(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "PWD="); ok {
			pwd = append(pwd, v)
		}
	}
	if len(pwd) != 1 || pwd[0] != dir {
		t.Errorf("PWD entries %q, want exactly %q", pwd, dir)
	}
	if err := p.CloseStdin(testContext(t)); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
}

func init() {
	afterRun = append(afterRun, agentproc.TrackCgroups())
}
