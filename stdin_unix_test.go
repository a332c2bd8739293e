//go:build unix

package agentproc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

func mustWrite(t *testing.T, p *agentproc.Process, s string) {
	t.Helper()
	n, err := p.WriteStdin(testContext(t), []byte(s))
	if err != nil || n != len(s) {
		t.Fatalf("WriteStdin(%q): got (%d, %v), want (%d, nil)", s, n, err, len(s))
	}
}

func TestStdinCat(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "cat", Stdin: true})
	if info := p.Info(); !info.Stdin || info.TTY {
		t.Errorf("Info Stdin/TTY got %v/%v, want true/false", info.Stdin, info.TTY)
	}
	mustWrite(t, p, "hello\n")
	waitForOutput(t, p, regexp.MustCompile(`hello\n`))
	mustWrite(t, p, "world\n")
	mustWrite(t, p, "no newline")
	if err := p.CloseStdin(t.Context()); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	info := mustWait(t, p)
	if exitCode(info) != 0 {
		t.Errorf("exit code got %d, want 0", exitCode(info))
	}
	if got, want := p.Output().Text, "hello\nworld\nno newline"; got != want {
		t.Errorf("output got %q, want %q", got, want)
	}
}

func TestStdinReadLine(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "read x; echo got:$x", Stdin: true})
	mustWrite(t, p, "abc def\n")
	mustWait(t, p)
	if got, want := p.Output().Text, "got:abc def\n"; got != want {
		t.Errorf("output got %q, want %q", got, want)
	}
}

// TestStdinREPL drives a line-by-line loop, sending each line only after the
// answer to the previous one arrived.
func TestStdinREPL(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{
		Command: `echo ready; while read l; do echo "=> $l"; done; echo bye`,
		Stdin:   true,
	})
	waitForOutput(t, p, regexp.MustCompile(`ready\n`))
	for i := range 5 {
		mustWrite(t, p, fmt.Sprintf("line %d\n", i))
		waitForOutput(t, p, regexp.MustCompile(fmt.Sprintf(`=> line %d\n`, i)))
	}
	if err := p.CloseStdin(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
	want := "ready\n=> line 0\n=> line 1\n=> line 2\n=> line 3\n=> line 4\nbye\n"
	if got := p.Output().Text; got != want {
		t.Errorf("output got %q, want %q", got, want)
	}
}

func TestNoStdin(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	// Without Stdin the child reads the null device: cat ends at once.
	p := mustStart(t, m, agentproc.Request{Command: "cat; echo done"})
	if _, err := p.WriteStdin(t.Context(), []byte("x")); !errors.Is(err, agentproc.ErrNoStdin) {
		t.Errorf("WriteStdin: got %v, want ErrNoStdin", err)
	}
	if err := p.CloseStdin(t.Context()); !errors.Is(err, agentproc.ErrNoStdin) {
		t.Errorf("CloseStdin: got %v, want ErrNoStdin", err)
	}
	if err := p.Resize(10, 10); !errors.Is(err, agentproc.ErrNoTTY) {
		t.Errorf("Resize: got %v, want ErrNoTTY", err)
	}
	info := mustWait(t, p)
	if info.Stdin || info.TTY {
		t.Errorf("Info Stdin/TTY got %v/%v, want false/false", info.Stdin, info.TTY)
	}
	if got := p.Output().Text; got != "done\n" {
		t.Errorf("output got %q, want %q", got, "done\n")
	}
}

func TestStdinClosed(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	t.Run("after exit", func(t *testing.T) {
		t.Parallel()
		p := mustStart(t, m, agentproc.Request{Command: "true", Stdin: true})
		mustWait(t, p)
		if n, err := p.WriteStdin(t.Context(), []byte("late\n")); n != 0 || !errors.Is(err, agentproc.ErrStdinClosed) {
			t.Errorf("WriteStdin after exit: got (%d, %v), want (0, ErrStdinClosed)", n, err)
		}
		if err := p.CloseStdin(t.Context()); err != nil {
			t.Errorf("CloseStdin after exit: got %v, want nil", err)
		}
	})
	t.Run("after CloseStdin", func(t *testing.T) {
		t.Parallel()
		p := mustStart(t, m, agentproc.Request{Command: "cat", Stdin: true})
		for range 2 {
			if err := p.CloseStdin(t.Context()); err != nil {
				t.Errorf("CloseStdin: got %v, want nil", err)
			}
		}
		if _, err := p.WriteStdin(t.Context(), []byte("late\n")); !errors.Is(err, agentproc.ErrStdinClosed) {
			t.Errorf("WriteStdin after CloseStdin: got %v, want ErrStdinClosed", err)
		}
		mustWait(t, p)
	})
	t.Run("child closed its stdin", func(t *testing.T) {
		t.Parallel()
		// The write end's only reader is gone while the process runs: the
		// write fails with EPIPE, which must surface as ErrStdinClosed.
		p := mustStart(t, m, agentproc.Request{Command: "exec 0<&-; echo closed; exec sleep 1000", Stdin: true})
		waitForOutput(t, p, regexp.MustCompile(`closed\n`))
		if _, err := p.WriteStdin(t.Context(), []byte("x\n")); !errors.Is(err, agentproc.ErrStdinClosed) {
			t.Errorf("WriteStdin to a closed reader: got %v, want ErrStdinClosed", err)
		}
		if _, err := p.Stop(testContext(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStdinNeverRead writes 10 MB to a child that never reads: every write
// returns within its bound and nothing deadlocks.
func TestStdinNeverRead(t *testing.T) {
	t.Parallel()
	const stall = 100 * time.Millisecond
	big := bytes.Repeat([]byte("x"), 10<<20)
	m := newManager(t, agentproc.WithStdinStall(stall))
	p := mustStart(t, m, agentproc.Request{Command: "exec sleep 1000", Stdin: true})

	t.Run("stall bound", func(t *testing.T) {
		n, err := p.WriteStdin(t.Context(), big)
		if !errors.Is(err, os.ErrDeadlineExceeded) || n >= len(big) {
			t.Errorf("WriteStdin: got (%d, %v), want a short count and os.ErrDeadlineExceeded", n, err)
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(testContext(t))
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := p.WriteStdin(ctx, big)
			errc <- err
		}()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("WriteStdin: got %v, want context.Canceled", err)
		}
	})
	t.Run("concurrent writers", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := p.WriteStdin(testContext(t), big[:1<<20]); !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("WriteStdin: got %v, want os.ErrDeadlineExceeded", err)
				}
			})
		}
		wg.Wait()
	})
	t.Run("stop ends a blocked write", func(t *testing.T) {
		// A bound far past the test deadline: the write can only end
		// because Stop closed stdin (the event), however slowly Stop runs
		// on a loaded machine. With the default 5 s bound a slow Stop
		// would end the write with ErrDeadlineExceeded instead.
		slow := newManager(t, agentproc.WithStdinStall(time.Hour))
		q := mustStart(t, slow, agentproc.Request{Command: "exec sleep 1000", Stdin: true})
		errc := make(chan error, 1)
		go func() {
			_, err := q.WriteStdin(testContext(t), big)
			errc <- err
		}()
		if _, err := q.Stop(testContext(t)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !errors.Is(err, agentproc.ErrStdinClosed) {
				t.Errorf("blocked WriteStdin after Stop: got %v, want ErrStdinClosed", err)
			}
		case <-testContext(t).Done():
			t.Fatal("WriteStdin still blocked after Stop")
		}
	})
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// TestStdinConcurrentWritesDoNotInterleave checks that each write reaches
// the child whole.
func TestStdinConcurrentWritesDoNotInterleave(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(1<<20, 1<<20, 0))
	p := mustStart(t, m, agentproc.Request{Command: "cat", Stdin: true})
	var wg sync.WaitGroup
	for i := range 8 {
		line := strings.Repeat(string(rune('a'+i)), 100<<10) + "\n"
		wg.Go(func() {
			if n, err := p.WriteStdin(testContext(t), []byte(line)); err != nil || n != len(line) {
				t.Errorf("WriteStdin: got (%d, %v), want (%d, nil)", n, err, len(line))
			}
		})
	}
	wg.Wait()
	if err := p.CloseStdin(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
	lines := strings.Split(strings.TrimSuffix(p.Output().Text, "\n"), "\n")
	if len(lines) != 8 {
		t.Fatalf("got %d lines, want 8", len(lines))
	}
	for _, l := range lines {
		if len(l) != 100<<10 || strings.Trim(l, l[:1]) != "" {
			t.Errorf("line of %d bytes starting %q is mixed, want 102400 equal bytes", len(l), l[:min(len(l), 10)])
		}
	}
}
