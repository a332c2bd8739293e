//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestShellCompletion: the scripts agentproc completion prints, sourced in
// a real bash, fish and zsh, complete subcommands, a command's flags (from
// the flag set that parses them) and the IDs of the serve's processes. zsh
// runs the completion function outside the completion system, with
// compadd replaced by a function that prints what it was given.
func TestShellCompletion(t *testing.T) {
	t.Parallel()
	shells := map[string]func(words []string) string{
		"bash": func(words []string) string {
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = shellQuote(w)
			}
			return `source <(agentproc completion bash) && COMP_WORDS=(agentproc ` + strings.Join(quoted, " ") + `) && COMP_CWORD=` +
				strconv.Itoa(len(words)) + ` && _agentproc && printf '%s\n' "${COMPREPLY[@]}"`
		},
		"fish": func(words []string) string {
			return `agentproc completion fish | source; complete -C` + shellQuote("agentproc "+strings.Join(words, " "))
		},
		"zsh": func(words []string) string {
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = shellQuote(w)
			}
			return `compdef() { : }; compadd() { [[ $1 == -a ]] && print -l -- ${(P)2} }; source <(agentproc completion zsh); ` +
				`words=(agentproc ` + strings.Join(quoted, " ") + `); CURRENT=` + strconv.Itoa(len(words)+1) + `; _agentproc`
		},
	}
	for shell := range shells {
		if _, err := exec.LookPath(shell); err != nil {
			t.Errorf("%s is not installed (.ci/install-test-deps.sh installs it)", shell)
			delete(shells, shell)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "agentproc")); err != nil {
		t.Fatal(err)
	}
	_, env := serveInDir(t, ctx, dir, "--grace", "1s")
	out, _, code := cli(t, ctx, env, "run", "-d", "--", "sleep 3600")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("run -d: exit %d", code)
	}
	complete := func(shell string, words ...string) []string {
		t.Helper()
		args := []string{"-c", shells[shell](words)}
		if shell == "bash" {
			args = append([]string{"--norc"}, args...)
		}
		cmd := exec.CommandContext(ctx, shell, args...)
		cmd.Env = append(os.Environ(), runMainEnv+"=1", "PATH="+bin+":"+os.Getenv("PATH"), env[0])
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", shell, err, b)
		}
		return strings.Fields(string(b))
	}
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{"lo"}, "logs"},
		{[]string{"run", "--rea"}, "--ready-port --ready-timeout"},
		{[]string{"logs", "--ta"}, "--tail"},
		{[]string{"mcp", "--max-r"}, "--max-running"},
		{[]string{"completion", "f"}, "fish"},
		{[]string{"stop", ""}, shortID(id)},
		{[]string{"logs", "-f", id[:3]}, shortID(id)},
	} {
		for shell := range shells {
			if got := strings.Join(complete(shell, tt.words...), " "); got != tt.want {
				t.Errorf("%s completing %q: got %q, want %q", shell, tt.words, got, tt.want)
			}
		}
	}
}
