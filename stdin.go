package agentproc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/xerrors"
)

// defaultStdinStall bounds how long one piece of a stdin write may wait for
// the child to make room. It is real time on purpose: it is enforced by the
// pipe's write deadline.
const defaultStdinStall = 5 * time.Second

// stdinChunk is the piece of a write that must go in within the stall bound,
// so a child that reads slowly but steadily never times out a large write.
const stdinChunk = 64 << 10

// WriteStdin writes b to the process's stdin (the terminal's input with
// Request.TTY) and returns how many bytes were written. It never blocks
// forever: when a 64 KiB piece of b cannot be written within 5 seconds
// because the child stops reading, it returns the bytes written so far and
// an error wrapping os.ErrDeadlineExceeded; the stdin stays usable. When ctx
// ends first it returns the bytes written so far and ctx.Err(). Concurrent
// writes do not interleave.
//
// It returns ErrNoStdin for a process started without Stdin or TTY, and
// ErrStdinClosed after CloseStdin, once the process has exited, or when the
// child closed its stdin.
func (p *Process) WriteStdin(ctx context.Context, b []byte) (int, error) {
	n, err := p.in.write(ctx, b)
	if n > 0 {
		// An answer ends the wait for input as far as the caller is
		// concerned; the input watcher decides afresh after a new quiet
		// period (see watchedInput.look).
		p.stdinWritten.Store(true)
		p.setAwaitingInput(false, 0)
	}
	return n, err
}

// CloseStdin signals end of input. For a pipe it closes the write end, so the
// child reads EOF once it has consumed what was written. On a terminal the
// input stays open (the terminal is also the output) and the terminal's EOF
// character (VEOF, usually ^D) is written instead: twice when the last byte
// written was not a newline, since the first only ends the pending line.
// Later writes return ErrStdinClosed; closing again returns nil. It returns
// ErrNoStdin for a process started without Stdin or TTY.
//
// Closing a pipe never waits. On a terminal the EOF character queues behind
// a write in progress, bounded like WriteStdin by the stall bound and by
// ctx: when ctx ends before the character could be queued, CloseStdin
// returns ctx.Err().
func (p *Process) CloseStdin(ctx context.Context) error {
	return p.in.closeStdin(ctx)
}

// stdinWriter is the writable end of a process's stdin: a pipe's write end, or
// the PTY master, which is also the output the supervisor reads and closes.
// A nil *stdinWriter is a process without stdin.
type stdinWriter struct {
	f     *os.File
	tty   bool
	stall time.Duration
	// sem admits one writer at a time so that concurrent writes never
	// interleave; it is a channel so that waiting for it is bounded too.
	sem chan struct{}

	mu     sync.Mutex
	closed bool // CloseStdin was called or the process exited
	// midLine: on a terminal, the last byte written was not a newline, so
	// the line discipline may hold a pending partial line.
	midLine bool
}

func newStdinWriter(f *os.File, tty bool, stall time.Duration) *stdinWriter {
	return &stdinWriter{f: f, tty: tty, stall: stall, sem: make(chan struct{}, 1)}
}

func (in *stdinWriter) isClosed() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.closed
}

// acquire takes the writer slot, waiting at most the stall bound or until
// ctx ends.
func (in *stdinWriter) acquire(ctx context.Context) error {
	select {
	case in.sem <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(in.stall)
	defer t.Stop()
	select {
	case in.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return xerrors.Errorf("agentproc: write stdin: another write made no progress for %v: %w", in.stall, os.ErrDeadlineExceeded)
	}
}

func (in *stdinWriter) write(ctx context.Context, b []byte) (int, error) {
	if in == nil {
		return 0, ErrNoStdin
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := in.acquire(ctx); err != nil {
		return 0, err
	}
	if in.isClosed() {
		<-in.sem
		return 0, ErrStdinClosed
	}
	return in.writeHeld(ctx, b)
}

// writeHeld writes b holding the writer slot and releases it.
func (in *stdinWriter) writeHeld(ctx context.Context, b []byte) (int, error) {
	if in.f.SetWriteDeadline(time.Time{}) != nil {
		// Unpollable files (pipes on Windows) take no deadline.
		return in.writeDetached(ctx, b)
	}
	defer func() { <-in.sem }()

	// ctx ending moves the deadline into the past, which makes a blocked
	// Write return at once. dlMu orders that against the loop setting the
	// next piece's deadline, so a cancellation is never overwritten.
	var dlMu sync.Mutex
	cancelled := false
	stop := context.AfterFunc(ctx, func() {
		dlMu.Lock()
		defer dlMu.Unlock()
		cancelled = true
		_ = in.f.SetWriteDeadline(time.Unix(1, 0))
	})
	defer stop()

	n := 0
	for len(b) > 0 {
		piece := b[:min(len(b), stdinChunk)]
		dlMu.Lock()
		if cancelled {
			dlMu.Unlock()
			return n, ctx.Err()
		}
		_ = in.f.SetWriteDeadline(time.Now().Add(in.stall))
		dlMu.Unlock()
		k, err := in.f.Write(piece)
		in.wrote(piece[:k])
		n += k
		b = b[k:]
		if err != nil {
			return n, in.writeError(ctx, err)
		}
	}
	return n, nil
}

// writeDetached writes b in a goroutine for files that take no deadline.
// If the bound or ctx ends first it returns, and the goroutine keeps the
// writer slot until its Write finishes (at the latest when the child or its
// stdin is gone), so later writes still never interleave with it.
func (in *stdinWriter) writeDetached(ctx context.Context, b []byte) (int, error) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-in.sem }()
		n, err := in.f.Write(b)
		in.wrote(b[:n])
		done <- result{n, err}
	}()
	t := time.NewTimer(in.stall)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return r.n, in.writeError(ctx, r.err)
		}
		return r.n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-t.C:
		return 0, xerrors.Errorf("agentproc: write stdin: no progress for %v: %w", in.stall, os.ErrDeadlineExceeded)
	}
}

// wrote records whether a terminal's pending line ends with what was just
// written.
func (in *stdinWriter) wrote(b []byte) {
	if !in.tty || len(b) == 0 {
		return
	}
	in.mu.Lock()
	in.midLine = b[len(b)-1] != '\n' && b[len(b)-1] != '\r'
	in.mu.Unlock()
}

// writeError maps a failed Write to the package's errors. A closed file or
// a reader that went away is ErrStdinClosed, never EPIPE: the caller can do
// nothing about either but stop writing.
func (in *stdinWriter) writeError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return xerrors.Errorf("agentproc: write stdin: no progress for %v: %w", in.stall, err)
	case in.isClosed(), errors.Is(err, os.ErrClosed), isBrokenPipe(err):
		return ErrStdinClosed
	}
	return xerrors.Errorf("agentproc: write stdin: %w", err)
}

func (in *stdinWriter) closeStdin(ctx context.Context) error {
	if in == nil {
		return ErrNoStdin
	}
	if !in.tty {
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.closed {
			return nil
		}
		in.closed = true
		// Closing also ends a Write blocked in another goroutine, which
		// then reports ErrStdinClosed.
		if err := in.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			return xerrors.Errorf("agentproc: close stdin: %w", err)
		}
		return nil
	}

	// A terminal's EOF is a byte in the input stream, so it queues behind
	// any write in progress.
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := in.acquire(ctx); err != nil {
		return err
	}
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		<-in.sem
		return nil
	}
	in.closed = true
	eof := []byte{veofChar(in.f)}
	if in.midLine {
		eof = append(eof, eof[0])
	}
	in.mu.Unlock()
	if _, err := in.writeHeld(ctx, eof); err != nil && !errors.Is(err, ErrStdinClosed) {
		return xerrors.Errorf("agentproc: close stdin: %w", err)
	}
	return nil
}

// closeAtExit is called by the supervisor once the process has exited: later
// writes fail with ErrStdinClosed. A pipe is closed here; a terminal's
// master is the output too and is closed by the supervisor after draining.
func (in *stdinWriter) closeAtExit() {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	if !in.tty {
		_ = in.f.Close()
	}
}

// stdio is the set of files a process is started with.
type stdio struct {
	out      *os.File     // read by the supervisor: the output pipe or the PTY master
	childOut *os.File     // the child's stdout and stderr
	childIn  *os.File     // the child's stdin; nil means the null device
	in       *stdinWriter // nil when the caller cannot write stdin
	tty      bool
}

// openStdio creates the files for req: one pipe for stdout and stderr, and
// a stdin pipe when asked; or a pseudo-terminal for all three.
func openStdio(req Request, stall time.Duration) (*stdio, error) {
	if req.TTY != nil {
		master, slave, err := openPTY(*req.TTY)
		if err != nil {
			return nil, err
		}
		out, err := ptyOutput(master)
		if err != nil {
			_ = master.Close()
			_ = slave.Close()
			return nil, err
		}
		return &stdio{out: out, childOut: slave, childIn: slave, in: newStdinWriter(master, true, stall), tty: true}, nil
	}
	r, w, err := outputPipe()
	if err != nil {
		return nil, xerrors.Errorf("agentproc: create output pipe: %w", err)
	}
	s := &stdio{out: r, childOut: w}
	if req.Stdin {
		ir, iw, err := inputPipe()
		if err != nil {
			_ = r.Close()
			_ = w.Close()
			return nil, xerrors.Errorf("agentproc: create stdin pipe: %w", err)
		}
		s.childIn = ir
		s.in = newStdinWriter(iw, false, stall)
	}
	return s, nil
}

// attach gives the child its files. With *os.File values os/exec starts no
// copying goroutines.
func (s *stdio) attach(cmd *exec.Cmd) {
	if s.childIn != nil {
		cmd.Stdin = s.childIn
	} else if null := childStdin(); null != nil {
		cmd.Stdin = null
	}
	cmd.Stdout = s.childOut
	cmd.Stderr = s.childOut
}

// closeChild closes the parent's copies of the child's ends after Start, so
// that EOF (or EIO on a PTY master) comes when the last holder in the tree is
// gone.
func (s *stdio) closeChild() {
	_ = s.childOut.Close()
	if s.childIn != nil && s.childIn != s.childOut {
		_ = s.childIn.Close()
	}
}

// closeAll releases every file when the process could not be started.
func (s *stdio) closeAll() {
	s.closeChild()
	_ = s.out.Close()
	if s.in != nil && !s.tty {
		_ = s.in.f.Close()
	}
}
