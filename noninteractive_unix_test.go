//go:build unix

package agentproc_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// interactiveKeys are the variables the non-interactive environment sets or
// removes (see WithNonInteractiveEnv).
var interactiveKeys = []string{
	"EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_MERGE_AUTOEDIT",
	"PAGER", "GIT_PAGER", "MANPAGER", "GH_PAGER", "SYSTEMD_PAGER",
	"GIT_TERMINAL_PROMPT", "GIT_ASKPASS", "SSH_ASKPASS", "GCM_INTERACTIVE",
	"GH_PROMPT_DISABLED", "DEBIAN_FRONTEND", "PIP_NO_INPUT", "GPG_TTY", "TERM", "NO_COLOR",
}

// hostEnv sets the host's environment for the test: a host set up for a
// person at a terminal, with an editor, an askpass program and a GPG_TTY.
// Tests that call it cannot be parallel (t.Setenv).
func hostEnv(t *testing.T) {
	for _, k := range interactiveKeys {
		t.Setenv(k, "") // restored after the test
		_ = os.Unsetenv(k)
	}
	t.Setenv("EDITOR", "vi")
	t.Setenv("VISUAL", "vi")
	t.Setenv("GIT_ASKPASS", "/usr/bin/host-askpass")
	t.Setenv("SSH_ASKPASS", "/usr/bin/host-askpass")
	t.Setenv("GPG_TTY", "/dev/pts/9")
	t.Setenv("TERM", "xterm-256color")
}

// childEnv runs env in a child and returns what it printed as a map, with
// ok false for keys it did not print.
func childEnv(t *testing.T, m *agentproc.Manager, req agentproc.Request) map[string]string {
	t.Helper()
	req.Command = "env"
	p := mustStart(t, m, req)
	info := mustWait(t, p)
	if exitCode(info) != 0 {
		t.Fatalf("env: exit %d: %s", exitCode(info), p.Output().Text)
	}
	env := map[string]string{}
	for line := range strings.SplitSeq(p.Output().Text, "\n") {
		line = strings.TrimSuffix(line, "\r") // a terminal's line ends
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

func TestNonInteractiveEnvDefaults(t *testing.T) {
	hostEnv(t)
	m := newManager(t)
	for _, tty := range []bool{false, true} {
		req := agentproc.Request{}
		if tty {
			req.TTY = &agentproc.TTYSize{Rows: 24, Cols: 200}
		}
		env := childEnv(t, m, req)
		want := map[string]string{
			"PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat", "GH_PAGER": "cat", "SYSTEMD_PAGER": "cat",
			"GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never", "GH_PROMPT_DISABLED": "1",
			"DEBIAN_FRONTEND": "noninteractive", "PIP_NO_INPUT": "1", "GIT_MERGE_AUTOEDIT": "no",
			"TERM": "dumb", "NO_COLOR": "1",
		}
		if tty {
			// A terminal keeps the host's TERM and its colours.
			want["TERM"] = "xterm-256color"
			delete(want, "NO_COLOR")
			if v, ok := env["NO_COLOR"]; ok {
				t.Errorf("tty: NO_COLOR got %q, want it unset", v)
			}
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("tty=%v: %s got %q, want %q", tty, k, env[k], v)
			}
		}
		for _, k := range []string{"EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR"} {
			if !strings.Contains(env[k], "agentproc: no editor") {
				t.Errorf("tty=%v: %s got %q, want the failing editor", tty, k, env[k])
			}
		}
		for _, k := range []string{"GIT_ASKPASS", "SSH_ASKPASS", "GPG_TTY"} {
			if v, ok := env[k]; ok {
				t.Errorf("tty=%v: %s got %q, want it removed", tty, k, v)
			}
		}
	}
}

// The hook and Request.Env win over the defaults, in that order: a request
// can always ask for an editor or a pager.
func TestNonInteractiveEnvOverrides(t *testing.T) {
	hostEnv(t)
	m := newManager(t, agentproc.WithEnv(func(base []string) ([]string, error) {
		return append(base, "GIT_ASKPASS=/opt/agent/askpass", "PAGER=less", "GIT_PAGER=more"), nil
	}))
	env := childEnv(t, m, agentproc.Request{Env: map[string]string{"EDITOR": "vi", "GIT_PAGER": "less -R"}})
	for k, want := range map[string]string{
		"EDITOR":              "vi",                 // Request.Env over the default
		"GIT_ASKPASS":         "/opt/agent/askpass", // the hook sets it deliberately
		"PAGER":               "less",               // the hook over the default
		"GIT_PAGER":           "less -R",            // Request.Env over the hook
		"GIT_TERMINAL_PROMPT": "0",                  // untouched defaults stay
	} {
		if env[k] != want {
			t.Errorf("%s got %q, want %q", k, env[k], want)
		}
	}
}

func TestNonInteractiveEnvOff(t *testing.T) {
	hostEnv(t)
	m := newManager(t, agentproc.WithNonInteractiveEnv(false))
	env := childEnv(t, m, agentproc.Request{})
	for _, k := range interactiveKeys {
		host, hostOK := os.LookupEnv(k)
		got, ok := env[k]
		if ok != hostOK || got != host {
			t.Errorf("%s: got %q (set %v), want the host's %q (set %v)", k, got, ok, host, hostOK)
		}
	}
}

// gitRepo makes a repository in a fresh directory and returns it, with the
// environment that keeps git away from the host's configuration.
func gitRepo(t *testing.T) (string, map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("needs git: %v", err)
	}
	dir := t.TempDir()
	env := map[string]string{
		"HOME": dir, "XDG_CONFIG_HOME": dir, "GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.invalid",
		"GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.invalid",
	}
	repo := filepath.Join(dir, "repo")
	cmd := exec.Command("git", "init", "-q", repo)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	return repo, env
}

// git commit without -m, with EDITOR=vi on the host, ends at once with
// git's complaint about the editor instead of waiting in vi.
func TestNonInteractiveGitCommit(t *testing.T) {
	hostEnv(t)
	repo, env := gitRepo(t)
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tty := range []bool{false, true} {
		req := agentproc.Request{Command: "git add f && git commit", WorkDir: repo, Env: env}
		if tty {
			req.TTY = &agentproc.TTYSize{}
		}
		p := mustStart(t, m, req)
		info, err := p.Wait(ctx)
		out := p.Output().Text
		if err != nil {
			t.Fatalf("tty=%v: git commit still running after 5 s: %q", tty, out)
		}
		if exitCode(info) == 0 || !strings.Contains(out, "agentproc: no editor") ||
			!strings.Contains(out, "problem with the editor") {
			t.Errorf("tty=%v: git commit: exit %d, output %q; want a failure naming the editor", tty, exitCode(info), out)
		}
	}
}

// git log of a long history under a terminal prints everything and exits
// rather than waiting in a pager.
func TestNonInteractiveGitLogTTY(t *testing.T) {
	t.Parallel()
	repo, env := gitRepo(t)
	var stream strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&stream, "commit refs/heads/main\nmark :%d\ncommitter a <a@example.invalid> %d +0000\ndata %d\nmessage %04d\n",
			i+1, 1700000000+i, len("message 0000\n"), i)
		if i > 0 {
			fmt.Fprintf(&stream, "from :%d\n", i)
		}
		stream.WriteString("\n")
	}
	imp := exec.Command("git", "fast-import", "--quiet")
	imp.Dir = repo
	for k, v := range env {
		imp.Env = append(imp.Env, k+"="+v)
	}
	imp.Stdin = strings.NewReader(stream.String())
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v: %s", err, out)
	}
	m := newManager(t, agentproc.WithEnv(func(base []string) ([]string, error) {
		// A host without PAGER still pages: git falls back to less.
		return append(base, "TERM=xterm", "LESS="), nil
	}))
	p := mustStart(t, m, agentproc.Request{
		Command: "git log --oneline main", WorkDir: repo, Env: env,
		TTY: &agentproc.TTYSize{Rows: 24, Cols: 80},
	})
	info, err := p.Wait(testContext(t))
	out := p.Output().Text
	if err != nil || exitCode(info) != 0 {
		t.Fatalf("git log: got (exit %d, %v), want exit 0; output ends %q", exitCode(info), err, out[max(0, len(out)-200):])
	}
	if !strings.Contains(out, "message 1999") || !strings.HasSuffix(strings.TrimSpace(out), "message 0000") {
		t.Errorf("git log: output %q...%q, want newest first down to message 0000", out[:min(len(out), 80)], out[max(0, len(out)-80):])
	}
}

// git asking for credentials (a server answering 401) fails at once instead
// of prompting, on a terminal too.
func TestNonInteractiveGitCredentials(t *testing.T) {
	t.Parallel()
	_, env := gitRepo(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="agentproc"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	m := newManager(t)
	for _, tty := range []bool{false, true} {
		req := agentproc.Request{Command: "git ls-remote " + srv.URL + "/x.git", Env: env}
		if tty {
			req.TTY = &agentproc.TTYSize{}
		}
		p := mustStart(t, m, req)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := p.Wait(ctx)
		cancel()
		out := p.Output().Text
		if err != nil {
			t.Fatalf("tty=%v: git ls-remote still running after 5 s: %q", tty, out)
		}
		if exitCode(info) == 0 || !strings.Contains(out, "terminal prompts disabled") {
			t.Errorf("tty=%v: git ls-remote: exit %d, output %q; want git's refusal to prompt", tty, exitCode(info), out)
		}
	}
}

// TestEnvFollowsHost checks that a change to the host's environment between
// two Starts reaches the second child: the Manager keeps the environment it
// built only while os.Environ is what it was built from. An inherited
// marker (a host that itself runs under agentproc) is replaced, never
// doubled.
func TestEnvFollowsHost(t *testing.T) {
	m := newManager(t)
	t.Setenv("AGENTPROC_TEST_HOST", "first")
	t.Setenv(agentproc.MarkerEnv, "the-hosts-own")
	if got := childEnv(t, m, agentproc.Request{})["AGENTPROC_TEST_HOST"]; got != "first" {
		t.Fatalf("first child: AGENTPROC_TEST_HOST=%q, want first", got)
	}
	t.Setenv("AGENTPROC_TEST_HOST", "second")
	p := mustStart(t, m, agentproc.Request{Command: `env | grep -c '^AGENTPROC_ID='; echo "$AGENTPROC_ID $AGENTPROC_TEST_HOST"`})
	mustWait(t, p)
	if want := "1\n" + p.ID() + " second\n"; p.Output().Text != want {
		t.Errorf("second child printed %q, want %q", p.Output().Text, want)
	}
}
