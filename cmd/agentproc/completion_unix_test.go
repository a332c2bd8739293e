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

// TestBashCompletion: the script agentproc completion bash prints,
// sourced in a real bash, completes subcommands, a command's flags (from
// the flag set that parses them) and the IDs of the serve's processes.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
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
	sock := filepath.Join(dir, "agentproc.sock")
	startServe(t, ctx, "--socket", sock, "--workdir", dir, "--grace", "1s")
	env := []string{socketEnv + "=" + sock}
	out, _, code := cli(t, ctx, env, "run", "-d", "--", "sleep 3600")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("run -d: exit %d", code)
	}
	complete := func(words ...string) []string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = shellQuote(w)
		}
		script := `source <(agentproc completion bash) && COMP_WORDS=(agentproc ` + strings.Join(quoted, " ") + `) && COMP_CWORD=` +
			strconv.Itoa(len(words)) + ` && _agentproc && printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.CommandContext(ctx, bash, "--norc", "-c", script)
		cmd.Env = append(os.Environ(), runMainEnv+"=1", "PATH="+bin+":"+os.Getenv("PATH"), socketEnv+"="+sock)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, b)
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
		if got := strings.Join(complete(tt.words...), " "); got != tt.want {
			t.Errorf("completing %q: got %q, want %q", tt.words, got, tt.want)
		}
	}
}
