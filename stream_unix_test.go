//go:build unix

package agentproc_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc"
)

// piecesProcess runs the "pieces" helper. Each call of the returned next
// lets the helper write its next piece; next(false) only waits until the
// first piece has been written.
func piecesProcess(t *testing.T, m *agentproc.Manager, pieces ...string) (p *agentproc.Process, next func(more bool)) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	req := helperRequest(t, "pieces")
	hexes := make([]string, len(pieces))
	for i, piece := range pieces {
		hexes[i] = hex.EncodeToString([]byte(piece))
	}
	req.Env[helperPiecesEnv] = strings.Join(hexes, ",")
	req.Env[helperFIFOEnv] = fifo
	p = mustStart(t, m, req)

	var w *os.File
	t.Cleanup(func() {
		if w != nil {
			_ = w.Close()
		}
	})
	next = func(more bool) {
		t.Helper()
		if w == nil {
			// Opening blocks until the helper opens its end, which it does
			// after writing the first piece. O_NONBLOCK would fail with
			// ENXIO instead, so a helper that died fails the test through
			// the process instead of hanging: open in a goroutine.
			opened := make(chan *os.File, 1)
			go func() {
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					t.Errorf("open fifo: %v", err)
				}
				opened <- f
			}()
			select {
			case w = <-opened:
			case <-p.Done():
				t.Fatalf("helper exited before opening the fifo: %q", p.Output().Text)
			}
			if w == nil {
				t.FailNow()
			}
		}
		if !more {
			return
		}
		if _, err := w.Write([]byte{1}); err != nil {
			t.Fatalf("write fifo: %v", err)
		}
	}
	return p, next
}

// follow reads p from offset 0 to EOF with WaitOutput and returns the data
// and the omitted count.
func follow(t *testing.T, p *agentproc.Process) (string, int64) {
	t.Helper()
	ctx := testContext(t)
	var sb strings.Builder
	var omitted, offset int64
	for {
		c, err := p.WaitOutput(ctx, offset)
		if err != nil {
			t.Fatalf("WaitOutput(%d): %v", offset, err)
		}
		if c.Offset != offset+c.Omitted || c.Next < c.Offset {
			t.Fatalf("WaitOutput(%d): inconsistent chunk %+v", offset, c)
		}
		if !utf8.ValidString(c.Data) {
			t.Fatalf("WaitOutput(%d): invalid UTF-8 %q", offset, c.Data)
		}
		sb.WriteString(c.Data)
		omitted += c.Omitted
		offset = c.Next
		if c.EOF {
			return sb.String(), omitted
		}
	}
}

func TestReadOffsetsAcrossHeadAndTail(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(10, 10, 0))
	p := mustStart(t, m, agentproc.Request{Command: `printf 0123456789; printf abcdefghij; printf ABCDEFGHIJ`})
	mustWait(t, p)
	tests := []struct {
		offset int64
		want   agentproc.Chunk
	}{
		{0, agentproc.Chunk{Data: "0123456789", Offset: 0, Next: 10}},
		{5, agentproc.Chunk{Data: "56789", Offset: 5, Next: 10}},
		{10, agentproc.Chunk{Data: "ABCDEFGHIJ", Offset: 20, Next: 30, Omitted: 10, EOF: true}},
		{15, agentproc.Chunk{Data: "ABCDEFGHIJ", Offset: 20, Next: 30, Omitted: 5, EOF: true}},
		{25, agentproc.Chunk{Data: "FGHIJ", Offset: 25, Next: 30, EOF: true}},
		{30, agentproc.Chunk{Offset: 30, Next: 30, EOF: true}},
		{99, agentproc.Chunk{Offset: 99, Next: 99, EOF: true}},
	}
	for _, tt := range tests {
		got, err := p.Read(tt.offset)
		if err != nil || got != tt.want {
			t.Errorf("Read(%d): got (%+v, %v), want %+v", tt.offset, got, err, tt.want)
		}
	}
	data, omitted := follow(t, p)
	if data != "0123456789ABCDEFGHIJ" || omitted != 10 {
		t.Errorf("follow: got (%q, %d omitted), want the head, the tail and 10 omitted", data, omitted)
	}
}

func TestConcurrentReadersIndependent(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(4096, 4096, 0))
	// 50000 lines "line NNNNNN\n", 12 bytes each, read while written: 600 kB,
	// far past the 8 KiB kept. The shell loop is CPU-bound and follow's
	// wait for its end is bounded by the test deadline, so it is kept
	// small enough to end well inside it on a loaded machine (200000 lines
	// took over 8 s of the 10 under make stress).
	p := mustStart(t, m, agentproc.Request{Command: `i=0; while [ $i -lt 50000 ]; do printf 'line %06d\n' $i; i=$((i+1)); done`})
	const total = 50000 * 12
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Go(func() {
			data, omitted := follow(t, p)
			if got := int64(len(data)) + omitted; got != total {
				t.Errorf("reader %d: data+omitted got %d, want %d", r, got, total)
			}
			if !strings.HasPrefix(data, "line 000000\nline 000001\n") || !strings.HasSuffix(data, "line 049999\n") {
				t.Errorf("reader %d: got %q...%q, want head and tail", r, data[:24], data[len(data)-12:])
			}
		})
	}
	wg.Wait()
	// Reading drained nothing: a late reader sees the same.
	if c, err := p.Read(0); err != nil || !strings.HasPrefix(c.Data, "line 000000\n") {
		t.Errorf("late Read(0): got (%.24q, %v), want the head", c.Data, err)
	}
}

func TestSplitRunesAtEveryByte(t *testing.T) {
	t.Parallel()
	const text = "a€😀é\n"
	for i := 1; i < len(text); i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			m := newManager(t)
			p, next := piecesProcess(t, m, text[:i], text[i:])
			next(false)
			c, err := p.Read(0)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(text[:i], c.Data) || !utf8.ValidString(c.Data) || c.Next != int64(len(c.Data)) {
				t.Errorf("Read(0) after %q: got %+v, want a whole-rune prefix", text[:i], c)
			}
			next(true)
			data, omitted := follow(t, p)
			if data != text || omitted != 0 {
				t.Errorf("follow: got (%q, %d), want (%q, 0)", data, omitted, text)
			}
		})
	}
}

func TestWaitOutputWokenByOneByte(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p, next := piecesProcess(t, m, "a", "b")
	ctx := testContext(t)
	c, err := p.WaitOutput(ctx, 0)
	if err != nil || c.Data != "a" || c.Next != 1 {
		t.Fatalf("WaitOutput(0): got (%+v, %v), want a", c, err)
	}
	const waiters = 1000
	got := make(chan agentproc.Chunk, waiters)
	for range waiters {
		go func() {
			c, err := p.WaitOutput(ctx, 1)
			if err != nil {
				t.Errorf("WaitOutput(1): %v", err)
			}
			got <- c
		}()
	}
	// A waiter whose ctx ends returns at once, without disturbing the others.
	short, cancel := context.WithCancel(ctx)
	cancel()
	if c, err := p.WaitOutput(short, 1); !errors.Is(err, context.Canceled) || c.Data != "" || c.Next != 1 {
		t.Errorf("WaitOutput with ended ctx: got (%+v, %v), want no data and Canceled", c, err)
	}
	select {
	case c := <-got:
		t.Fatalf("a waiter returned before the write: %+v", c)
	default:
	}
	next(true)
	for range waiters {
		if c := <-got; c.Data != "b" || c.Offset != 1 || c.Next != 2 {
			t.Errorf("waiter: got %+v, want b at 1", c)
		}
	}
	mustWait(t, p)
	if c, err := p.WaitOutput(ctx, 2); err != nil || !c.EOF || c.Next != 2 || c.Data != "" {
		t.Errorf("WaitOutput at the end after exit: got (%+v, %v), want EOF at 2", c, err)
	}
}

func TestWaitMatchLineInThreePieces(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p, next := piecesProcess(t, m, "booting\nserver rea", "dy on ", "port 8080\nmore")
	ctx := testContext(t)
	type result struct {
		line string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		line, err := p.WaitMatch(ctx, regexp.MustCompile(`ready on .*\d$`))
		done <- result{line, err}
	}()
	offset := int64(0)
	for _, want := range []string{"booting\nserver rea", "dy on "} {
		// Wait until the piece is in the buffer; WaitMatch must still wait.
		var got string
		for got != want {
			c, err := p.WaitOutput(ctx, offset)
			if err != nil {
				t.Fatal(err)
			}
			got += c.Data
			offset = c.Next
		}
		select {
		case r := <-done:
			t.Fatalf("WaitMatch returned on a partial line: %+v", r)
		default:
		}
		next(true)
	}
	r := <-done
	if r.err != nil || r.line != "server ready on port 8080" {
		t.Errorf("WaitMatch: got (%q, %v), want (%q, nil)", r.line, r.err, "server ready on port 8080")
	}
	// The unterminated last line counts once the process has exited.
	mustWait(t, p)
	if line, err := p.WaitMatch(ctx, regexp.MustCompile(`^more$`)); err != nil || line != "more" {
		t.Errorf("WaitMatch on the last line: got (%q, %v), want more", line, err)
	}
}

func TestWaitMatchExitedWithoutMatch(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p, next := piecesProcess(t, m, "almost ready", "\nbye\n")
	done := make(chan error, 1)
	go func() {
		_, err := p.WaitMatch(testContext(t), regexp.MustCompile(`^ready`))
		done <- err
	}()
	next(true)
	if err := <-done; !errors.Is(err, agentproc.ErrExited) {
		t.Errorf("WaitMatch: got %v, want ErrExited", err)
	}
	if info := p.Info(); info.Running {
		t.Errorf("after ErrExited Info is %+v, want exited", info)
	}
}

func TestWaitMatchSkipsLineCutByDrop(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(8, 8, 0))
	// "xx ready" is the end of a line whose start was dropped: not a match.
	p := mustStart(t, m, agentproc.Request{Command: `printf 'head\nnot yet ready\nend\n'`})
	mustWait(t, p)
	if _, err := p.WaitMatch(testContext(t), regexp.MustCompile(`ready`)); !errors.Is(err, agentproc.ErrExited) {
		t.Errorf("WaitMatch across a drop: got %v, want ErrExited", err)
	}
	if line, err := p.WaitMatch(testContext(t), regexp.MustCompile(`^end$`)); err != nil || line != "end" {
		t.Errorf("WaitMatch in the tail: got (%q, %v), want end", line, err)
	}
}

func TestWaitMatchCtxEnds(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo waiting; exec sleep 1000"})
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() {
		_, err := p.WaitMatch(ctx, regexp.MustCompile(`ready`))
		done <- err
	}()
	if _, err := p.WaitMatch(testContext(t), regexp.MustCompile(`waiting`)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WaitMatch after cancel: got %v, want Canceled", err)
	}
	if _, err := p.Stop(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// TestOffsetAtSplitsByTime: output written before and after a moment of
// the Manager's clock is told apart by OffsetAt, as logs --since needs.
func TestOffsetAtSplitsByTime(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	m := newManager(t, agentproc.WithClock(clk))
	ctx := testContext(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo before; read x; echo after", Stdin: true})
	if _, err := p.WaitMatch(ctx, regexp.MustCompile(`^before$`)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	split := clk.Now()
	clk.Advance(10 * time.Second)
	if _, err := p.WriteStdin(ctx, []byte("\n")); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
	if got := p.OffsetAt(split); got != int64(len("before\n")) {
		t.Errorf("OffsetAt between the lines: got %d, want %d", got, len("before\n"))
	}
	if c, _ := p.Read(p.OffsetAt(split)); c.Data != "after\n" {
		t.Errorf("Read from OffsetAt: got %q, want the line written after", c.Data)
	}
	if got := p.OffsetAt(split.Add(-time.Hour)); got != 0 {
		t.Errorf("OffsetAt before any output: got %d, want 0", got)
	}
	if got := p.OffsetAt(clk.Now().Add(time.Second)); got != int64(len("before\nafter\n")) {
		t.Errorf("OffsetAt after all output: got %d, want the end", got)
	}
}
