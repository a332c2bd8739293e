package agentproc_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// followUntilInput follows p's output with WaitOutput until a chunk says the
// process awaits input, and returns the output read so far.
func followUntilInput(t *testing.T, p *agentproc.Process) string {
	t.Helper()
	ctx := testContext(t)
	var out strings.Builder
	var next int64
	for {
		c, err := p.WaitOutput(ctx, next)
		if err != nil {
			t.Fatalf("WaitOutput: %v; output so far %q", err, out.String())
		}
		out.WriteString(c.Data)
		if c.AwaitingInput {
			return out.String()
		}
		if c.EOF {
			t.Fatalf("process exited without awaiting input; output %q", out.String())
		}
		next = c.Next
	}
}

// TestAwaitingInputPipe follows an installer-like script that asks a
// question on a stdin pipe: WaitOutput returns with the prompt (a line
// without a newline) and AwaitingInput, while a process with a stdin pipe
// that only sleeps is never reported as waiting.
func TestAwaitingInputPipe(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithInputQuiet(100*time.Millisecond))
	ctx := testContext(t)
	events := m.Subscribe(ctx)
	sleeper := mustStart(t, m, agentproc.Request{Command: "exec sleep 30", Stdin: true})
	p := mustStart(t, m, agentproc.Request{
		Command: `echo 'Installing...'; printf 'Proceed? [y/N] '; read ans; echo "answer=$ans"`,
		Stdin:   true,
	})
	out := followUntilInput(t, p)
	if !strings.HasSuffix(out, "Proceed? [y/N] ") {
		t.Errorf("output when awaiting input: got %q, want it to end with the prompt", out)
	}
	if !p.Info().AwaitingInput {
		t.Errorf("Info.AwaitingInput: got false, want true")
	}
	for e := range events {
		if e.Type == agentproc.EventAwaitingInput {
			if e.ID != p.ID() || e.Line != "Proceed? [y/N] " {
				t.Errorf("awaiting_input event: got %+v, want the prompt of %s", e, p.ID())
			}
			break
		}
	}
	// The sleeper started first and has been quiet at least as long, and
	// the watcher looks at both in each pass.
	if sleeper.Info().AwaitingInput {
		t.Errorf("sleeper: AwaitingInput true, want false (it reads nothing)")
	}
	if _, err := p.WriteStdin([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitMatch(ctx, regexp.MustCompile(`answer=y$`)); err != nil {
		t.Fatalf("WaitMatch: %v (output %q, info %+v)", err, p.Output().Text, p.Info())
	}
	if info := mustWait(t, p); info.AwaitingInput {
		t.Errorf("AwaitingInput after exit: got true, want false")
	}
}

// TestAwaitingInputTTY asks with bash's read -p under a terminal, where the
// prompt comes from bash itself.
func TestAwaitingInputTTY(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithInputQuiet(100*time.Millisecond))
	p := mustStart(t, m, agentproc.Request{
		Command: `exec bash -c 'read -p "Password: " pw; echo "got=$pw"'`,
		TTY:     &agentproc.TTYSize{},
	})
	out := followUntilInput(t, p)
	if !strings.HasSuffix(out, "Password: ") {
		t.Errorf("output when awaiting input: got %q, want it to end with the prompt", out)
	}
	if _, err := p.WriteStdin([]byte("s3cret\n")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := p.WaitMatch(ctx, regexp.MustCompile(`got=s3cret`)); err != nil {
		t.Fatalf("WaitMatch: %v (output %q)", err, p.Output().Text)
	}
}

// TestAwaitingInputPoll: a program that waits for its stdin in select()
// (Python's input() on a terminal goes through readline's select loop)
// counts too.
func TestAwaitingInputPoll(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithInputQuiet(100*time.Millisecond))
	p := mustStart(t, m, agentproc.Request{
		Command: `exec python3 -c 'import select,sys; print("ask", flush=True); select.select([sys.stdin],[],[]); print("line=" + sys.stdin.readline().strip())'`,
		Stdin:   true,
	})
	followUntilInput(t, p)
	if _, err := p.WriteStdin([]byte("ok\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitMatch(testContext(t), regexp.MustCompile(`line=ok`)); err != nil {
		t.Fatalf("WaitMatch: %v", err)
	}
}
