package agentproc

import (
	"context"
	"regexp"
	"strings"
	"time"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/pattern"
)

// maxMatchLineBytes bounds the line WaitMatch assembles across writes. A
// follower that keeps up with a child writing one endless line would
// otherwise hold all of it; a longer line is skipped, never matched.
const maxMatchLineBytes = 1 << 20

// maxMatchWork bounds the work one line's match costs, counted as the
// line's length times the pattern's program size (pattern.Size): Go's
// regexp is linear in the text, times the program. A caller's pattern is
// often a model's or an HTTP client's (llmtool's process_wait, httpapi's
// wait_for; both refuse one over pattern.MaxInsts), and a 260 KB
// alternation (60,000 instructions) made one 4 KiB line cost the host
// 6.5 s and a 1 MiB line half an hour, in a match no ctx can stop
// (fourteenth attack review, TestAttackPatternCostsHostCPU). At this bound
// a line costs at most about 3 s on an idle machine (a loaded one takes
// several times that), and a pattern of up to 64 instructions
// (most are under 50) still matches lines up to maxMatchLineBytes.
const maxMatchWork = 64 * maxMatchLineBytes

// Read returns the retained output from offset on, without blocking.
// Offsets are absolute: offset 0 is the first byte the process ever wrote.
// Pass Chunk.Next as the offset of the next read; Chunk.Omitted then says
// how many bytes were dropped from the middle of long output before
// Chunk.Offset. An offset at or past the end returns no data and Next equal
// to offset. Reading drains nothing, so any number of readers can follow the
// same process with offsets of their own.
//
// A negative offset is ErrInvalidRequest. Once a Chunk reports EOF, Info
// reports the process as exited.
func (p *Process) Read(offset int64) (Chunk, error) {
	if err := validateOffset(offset); err != nil {
		return Chunk{Offset: offset, Next: offset}, err
	}
	return p.buf.read(offset), nil
}

// OffsetAt returns an offset from which Read returns everything the
// process wrote at or after t, as docker logs --since does: pass it to Read
// or WaitOutput. Output carries no timestamps; the Manager notes when
// output was written in at most 256 marks per process, each covering at
// most a second of writes while there are fewer, after which the two
// neighbours covering the shortest time are merged. So the output from
// the offset may begin with output of the same mark written before t: up
// to a second's worth for a process that has written for less than about
// four minutes, more for one that has written steadily for longer, while
// a quiet stretch (a server between requests) stays exact. A t before the
// first write gives 0, a t after the last write the end of the output.
// The times are the Manager's clock (WithClock) when the bytes reached it:
// for output a recovered process wrote while no Manager followed it, the
// time it was read back.
func (p *Process) OffsetAt(t time.Time) int64 {
	return p.buf.offsetAt(t)
}

// WaitOutput is Read, but when there is nothing after offset yet it blocks
// until the process writes a byte, exits, starts waiting for input, or ctx
// ends. It wakes on the write itself, not on a timer, and waiters cost no
// goroutine of their own. When ctx ends first it returns Read(offset) and
// ctx.Err(); output already available is returned even if ctx has ended.
//
// For a process with Request.Stdin or Request.TTY, WaitOutput returns at
// once with Chunk.AwaitingInput set while the process awaits input
// (Info.AwaitingInput) and nothing after offset is left to read: the
// unfinished prompt line has been returned already, and more output will
// only come after the caller answers. A write to its stdin (WriteStdin)
// clears the state; until then, or until the process writes again,
// WaitOutput keeps returning at once, so a caller that does not answer
// must wait on something else.
func (p *Process) WaitOutput(ctx context.Context, offset int64) (Chunk, error) {
	if err := validateOffset(offset); err != nil {
		return Chunk{Offset: offset, Next: offset}, err
	}
	if p.in == nil {
		return p.buf.waitRead(ctx, offset)
	}
	for {
		// Both channels are taken before the read, so neither a write nor
		// the start of a wait for input can slip in unnoticed.
		changed := p.buf.changed()
		awaiting, inputCh := p.state.inputWait()
		c := p.buf.read(offset)
		if c.Data != "" || c.Omitted > 0 || c.EOF {
			return c, nil
		}
		if awaiting {
			c.AwaitingInput = true
			return c, nil
		}
		select {
		case <-changed:
		case <-inputCh:
		case <-ctx.Done():
			return p.buf.read(offset), ctx.Err()
		}
	}
}

// WaitMatch blocks until a complete line of output matches re and returns
// that line without its line ending ("\n" or "\r\n"). It searches from the
// start of the retained output, so a line written before the call is found
// too, and then follows new output as it is written, waking on writes, not
// on a timer.
//
// A line is complete when its newline has been written, or when the process
// has exited. A line whose start was dropped from the middle of long output
// is never matched, nor is a line that had to be assembled from more than
// 1 MiB of reads, nor a line whose length times re's program size (its
// compiled instructions) passes 64 MiB: a pattern of up to 64
// instructions matches lines of up to 1 MiB assembled from reads and
// longer ones that arrive within one read (possible with a large head), a
// pattern of 6,400 instructions lines of up to 10 KiB, so that one line's
// match, which nothing can interrupt, costs at most a few seconds. ctx is
// checked between lines. WaitMatch returns
// ErrExited if the process exits without a matching line, and ctx.Err() if
// ctx ends first. A nil re is ErrInvalidRequest.
//
// With Plain, each line is rendered by PlainText before it is matched and
// is returned rendered, so a pattern sees what a terminal shows: a URL
// printed with colour codes inside it matches a plain pattern.
func (p *Process) WaitMatch(ctx context.Context, re *regexp.Regexp, opts ...OutputOption) (string, error) {
	if re == nil {
		return "", xerrors.Errorf("nil regexp: %w", ErrInvalidRequest)
	}
	lm := newLineMatcher(re, outputOptionsOf(opts).plain)
	var offset int64
	for {
		c, err := p.buf.waitRead(ctx, offset)
		if err != nil {
			return "", err
		}
		line, ok, err := lm.feed(ctx, c)
		if err != nil {
			return "", err
		}
		if ok {
			return line, nil
		}
		offset = c.Next
		if c.EOF {
			if line, ok := lm.finish(); ok {
				return line, nil
			}
			return "", xerrors.Errorf("process %s: no line matched %q: %w", p.id, re.String(), ErrExited)
		}
	}
}

func validateOffset(offset int64) error {
	if offset < 0 {
		return xerrors.Errorf("negative offset %d: %w", offset, ErrInvalidRequest)
	}
	return nil
}

// lineMatcher splits successive chunks of output into lines and matches
// each complete line once. Only the unfinished last line is kept between
// chunks, so every byte is scanned once however often WaitMatch wakes.
type lineMatcher struct {
	re    *regexp.Regexp
	plain bool // match and return lines rendered by PlainText
	// maxLine is the longest line matched (maxMatchWork), and the most
	// partial holds.
	maxLine int
	// partial is the start of the current line when it began in an earlier
	// chunk.
	partial strings.Builder
	// skip is set while the current line cannot be matched: its start was
	// dropped, or it grew past maxMatchLineBytes.
	skip bool
}

// newLineMatcher returns a matcher of lines against re whose work per line
// is bounded by maxMatchWork.
func newLineMatcher(re *regexp.Regexp, plain bool) lineMatcher {
	return lineMatcher{re: re, plain: plain, maxLine: maxMatchWork / max(1, min(pattern.Size(re), maxMatchWork))}
}

// feed scans c and returns the first complete line that matches. It
// returns ctx.Err() when ctx has ended between two lines.
func (l *lineMatcher) feed(ctx context.Context, c Chunk) (string, bool, error) {
	if c.Omitted > 0 {
		// The bytes before the gap and the line the gap cuts into are one
		// line whose middle is gone; matching its halves could report a
		// line the process never wrote.
		l.partial.Reset()
		l.skip = true
	}
	data := c.Data
	for {
		i := strings.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		data = data[i+1:]
		if l.skip {
			l.skip = false
			continue
		}
		if l.partial.Len() > 0 {
			l.partial.WriteString(line)
			line = l.partial.String()
			l.partial.Reset()
		}
		if err := ctx.Err(); err != nil {
			return "", false, err
		}
		if m, ok := l.match(line); ok {
			return m, true, nil
		}
	}
	if !l.skip && data != "" {
		if l.partial.Len()+len(data) > min(maxMatchLineBytes, l.maxLine) {
			l.partial.Reset()
			l.skip = true
		} else {
			l.partial.WriteString(data)
		}
	}
	return "", false, nil
}

// finish treats the unfinished last line as complete: the process has
// exited, so nothing more will be added to it.
func (l *lineMatcher) finish() (string, bool) {
	if l.skip || l.partial.Len() == 0 {
		return "", false
	}
	line := l.partial.String()
	l.partial.Reset()
	return l.match(line)
}

// match returns the line as WaitMatch reports it (without "\r", rendered
// with plain) and whether it matches.
func (l *lineMatcher) match(line string) (string, bool) {
	if len(line) > l.maxLine {
		return "", false
	}
	line = strings.TrimSuffix(line, "\r")
	if l.plain {
		line = PlainText(line)
	}
	return line, l.re.MatchString(line)
}
