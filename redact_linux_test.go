package agentproc_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// TestRedactAwaitingInputLine: the prompt of an EventAwaitingInput,
// taken from the output, is redacted too.
func TestRedactAwaitingInputLine(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithInputQuiet(100*time.Millisecond),
		agentproc.WithSecrets(map[string]string{"GH_TOKEN": redactToken}))
	events := m.Subscribe(testContext(t))
	p := mustStart(t, m, agentproc.Request{
		Command: `printf 'token %s: ' "$V"; read x`, Env: map[string]string{"V": redactToken}, Stdin: true,
	})
	out := followUntilInput(t, p)
	if want := "token [redacted:GH_TOKEN]: "; out != want {
		t.Errorf("output when awaiting input: got %q, want %q", out, want)
	}
	for e := range events {
		if e.Type == agentproc.EventAwaitingInput && e.ID == p.ID() {
			if want := "token [redacted:GH_TOKEN]: "; e.Line != want {
				t.Errorf("awaiting_input Line: got %q, want %q", e.Line, want)
			}
			break
		}
	}
	if err := p.CloseStdin(testContext(t)); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
}

// runnerOf returns the pid of the runner of detached process id: the
// process whose environment names the tree's marker for the runner.
func runnerOf(t *testing.T, id string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte("AGENTPROC_DETACH_ID="+id+"\x00")) && bytes.Contains(env, []byte("AGENTPROC_DETACH_RUNNER=1")) {
			return pid
		}
	}
	t.Fatalf("no runner found for %s", id)
	return 0
}

// TestRedactDetached: a detached process's runner redacts its output
// before the segment files, with secrets it got on a pipe, not through
// its argv or environment; a Manager that adopts it after a restart sees
// the same redacted output, and the runner's count in Info.Redactions.
func TestRedactDetached(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := makeFIFOs(t, 1)[0]
	secrets := agentproc.WithSecrets(map[string]string{"GH_TOKEN": redactToken})
	m1 := agentproc.New(agentproc.WithStateDir(dir), secrets)
	// The child reads the secret from a file, so that no environment
	// holds it.
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(redactToken), 0o600); err != nil {
		t.Fatal(err)
	}
	p1 := mustStart(t, m1, agentproc.Request{
		Command: "V=$(cat " + file + ")\n" + redactPrinter + "\n" + exitOnFIFO(fifo, 0),
		Secrets: map[string]string{"REQ_ONLY": "request-only-secret"},
		Detach:  true,
	})
	t.Cleanup(func() {
		if t.Failed() { // the FIFO was not written: end the tree it waits in
			_ = syscall.Kill(-p1.Info().PID, syscall.SIGKILL)
		}
	})
	if _, err := p1.WaitMatch(testContext(t), regexp.MustCompile(`slow end`)); err != nil {
		t.Fatalf("WaitMatch: %v (output %q)", err, p1.Output().Text)
	}
	runner := runnerOf(t, p1.ID())
	for _, f := range []string{"cmdline", "environ"} {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(runner), f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(redactToken)) || bytes.Contains(data, []byte("request-only-secret")) {
			t.Errorf("runner's %s holds a secret: got %q", f, data)
		}
	}
	requireNoLeak(t, "detached Output", p1.Output().Text, redactToken)
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}

	m2 := newManager(t, agentproc.WithStateDir(dir))
	if _, err := m2.Recovered(testContext(t)); err != nil {
		t.Fatal(err)
	}
	p2, err := m2.Get(p1.ID())
	if err != nil {
		t.Fatal(err)
	}
	writeFIFO(t, fifo, "request-only-secret")
	info := mustWait(t, p2)
	text := p2.Output().Text
	requireNoLeak(t, "adopted Output", text, redactToken)
	requireNoLeak(t, "adopted Output", text, "request-only-secret")
	if !strings.Contains(text, "raw [redacted:GH_TOKEN] end\n") || !strings.HasSuffix(text, "bye [redacted:REQ_ONLY]\n") {
		t.Errorf("adopted Output: got %q, want the secrets redacted and the text around them kept", text)
	}
	if want := redactPrinterCount + 1; info.Redactions != want {
		t.Errorf("Info.Redactions: got %d, want %d (the runner's count)", info.Redactions, want)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "out", p1.ID(), "seg-*"))
	for _, s := range segs {
		data, _ := os.ReadFile(s)
		requireNoLeak(t, "segment file "+filepath.Base(s), string(data), redactToken)
	}
}

// TestRedactHostEnvDefaultSandboxed: the host's secret-looking variables
// are redacted in a sandboxed tree's output too. The sandbox keeps them
// out of its environment, so the tree prints the value from a file of
// its workspace (a .env). Not parallel: it sets the test process's
// environment.
func TestRedactHostEnvDefaultSandboxed(t *testing.T) {
	requireSandbox(t)
	const value = "host-token-value-5678"
	t.Setenv("AGENTPROC_TEST_API_TOKEN", value)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("API_TOKEN="+value+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newManager(t)
	out := runSandboxed(t, m, agentproc.Request{WorkDir: ws, Sandbox: agentproc.WorkspaceSandbox(ws),
		Command: `cat .env; printf 'env:%s\n' "$AGENTPROC_TEST_API_TOKEN"`})
	if want := "API_TOKEN=[redacted:AGENTPROC_TEST_API_TOKEN]\nenv:\n"; out.Text != want || out.Redactions != 1 {
		t.Errorf("sandboxed: got %q with %d redactions, want %q with 1", out.Text, out.Redactions, want)
	}
}
