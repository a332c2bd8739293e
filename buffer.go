package agentproc

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/quartz"
)

// Chunk is one read of a process's output, starting at an absolute offset:
// the number of bytes the process had written before it, counting from 0.
//
// To follow output, start at offset 0 and pass Next as the offset of the
// following read. Every byte the process writes is then accounted for exactly
// once, either in Data or in Omitted.
type Chunk struct {
	// Data is output starting at Offset, always valid UTF-8. Bytes the process
	// wrote that are not valid UTF-8 appear as U+FFFD. A rune whose bytes have
	// not all been written yet is held back until it completes or the process
	// exits, so a rune is never split across two chunks.
	Data string
	// Offset is the absolute offset of Data's first byte. It is the requested
	// offset plus Omitted.
	Offset int64
	// Next is the offset to pass to the following read: Offset plus the number
	// of bytes the process wrote that Data represents. It never goes backwards.
	// For a requested offset beyond the end of the output, Next is that offset.
	Next int64
	// Omitted counts bytes between the requested offset and Offset that were
	// skipped: bytes no longer retained (the middle of long output is
	// dropped), and the bytes of a rune cut in two by that drop or by a
	// requested offset that pointed into the middle of a rune.
	Omitted int64
	// EOF reports that the process has exited and Next is the end of its
	// output, so no read from Next will ever return more.
	EOF bool
	// AwaitingInput is set by WaitOutput when it returned because the
	// process is waiting for input (Info.AwaitingInput) with nothing more
	// to read: answer with WriteStdin before waiting again.
	AwaitingInput bool
}

// Truncation describes how Output.Text differs from the full output of a
// process. It is nil when Text is the whole output unchanged.
//
// Its JSON tags are part of httpapi's wire format, which embeds it; they are
// kept stable (TestWireTags).
type Truncation struct {
	// OriginalBytes is the exact number of bytes the process wrote.
	OriginalBytes int64 `json:"original_bytes"`
	// RetainedBytes is the number of those bytes that Text shows, counted as
	// written (before invalid UTF-8 became U+FFFD). Bytes removed from long
	// lines still count as retained: they were kept, only not displayed in
	// full, and TruncatedLines says so.
	RetainedBytes int64 `json:"retained_bytes"`
	// OmittedBytes is OriginalBytes minus RetainedBytes: the bytes dropped
	// from the middle of the output, the bytes of runes cut in two at either
	// side of that drop, and, while the process runs, a rune at the very end
	// whose remaining bytes have not been written yet.
	OmittedBytes int64 `json:"omitted_bytes"`
	// TruncatedLines counts lines cut to the line length limit.
	TruncatedLines int `json:"truncated_lines"`
	// Strategy names how bytes were chosen to keep; it is always "head_tail":
	// the start and the end of the output are kept, the middle is dropped.
	Strategy string `json:"strategy"`
}

// truncationStrategy is the only value Truncation.Strategy takes.
const truncationStrategy = "head_tail"

// minHeadGrowth is the smallest capacity the head is grown to, so that a
// process writing many tiny chunks does not reallocate on each of them.
const minHeadGrowth = 512

// closedChan is returned by changed once no more writes can come, so that a
// caller waiting on it wakes at once instead of forever.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// outputBuffer collects a process's combined stdout and stderr. It keeps the
// first headBytes written and a ring of the last tailBytes, and counts every
// byte exactly, so its memory stays bounded by headBytes+tailBytes however
// much the process writes, and grows with the output up to that bound: a
// large limit costs only what is written. Bytes go to the head until it is
// full and only then to the ring, so the two never overlap.
//
// Absolute offsets count every byte ever written, from 0. The retained bytes
// are [0, headEnd) and [tailStart, total); they are one contiguous region when
// tailStart == headEnd, and the bytes between are gone.
//
// All methods are safe for concurrent use. Use newOutputBuffer; the zero value
// keeps nothing.
type outputBuffer struct {
	mu sync.Mutex

	headBytes int // capacity limit of head
	tailBytes int // size of ring once grown in full; 0 keeps no tail

	// head holds the first min(total, headBytes) bytes. It grows by doubling
	// rather than being allocated in full, because most processes write far
	// less than headBytes.
	head []byte
	// ring holds the last ringLen bytes written after the head filled, ending
	// just before ring[ringEnd]; indexes wrap at tailBytes. It grows like the
	// head, by doubling, and until it reaches tailBytes it has never wrapped:
	// its bytes are ring[:ringLen], and ringEnd is ringLen.
	ring    []byte
	ringLen int
	ringEnd int

	written int64 // every byte ever written
	closed  bool  // closeWrite was called; writes are ignored from then on

	// notify is closed and cleared by the next write or closeWrite. It is
	// made only when someone asks for it, so writes with nobody waiting do
	// not allocate, and all waiters share it instead of each polling.
	notify chan struct{}

	// clock times the marks; nil keeps none (see offsetAt).
	clock quartz.Clock
	// marks say when output was written: each covers the bytes from its
	// offset to the next mark's, all written between its first and last
	// times. Both ascend. A new mark begins when markGap has passed since
	// the current one began; when maxMarks are held, the two neighbours
	// that together cover the shortest time are merged first, so memory is
	// bounded while quiet periods, the times a since-time usually falls
	// in, are the last to be blurred.
	marks []outputMark
	// untimed counts the writes since the last timed one; prevLen is the
	// length of the latest write (see Write).
	untimed int
	prevLen int
}

// outputMark covers the output from off to the next mark's off, written
// between first and last (Unix nanoseconds).
type outputMark struct {
	off         int64
	first, last int64
}

const (
	// maxMarks bounds the marks a buffer keeps: 6 KiB at most, grown
	// as output comes.
	maxMarks = 256
	// markGap is the most time one mark covers until marks are merged:
	// the granularity of offsetAt for a process with fewer marks.
	markGap = time.Second
	// largeWrite and maxUntimed say which writes are timed (see Write).
	largeWrite = 4 << 10
	maxUntimed = 64
)

// markTags name the clock calls of marks in a quartz mock; a package
// variable, so that passing them allocates nothing per write.
var markTags = []string{"agentproc", "output-mark"}

// maxOutputLimit is the largest head or tail a buffer keeps; larger limits
// are clamped to it, so that head plus tail cannot overflow an int: 1 GiB,
// or a quarter of the int range where int is 32 bits (512 MiB).
const maxOutputLimit = min(1<<30, math.MaxInt/4)

// newOutputBuffer returns a buffer keeping the first headBytes and the last
// tailBytes written. Either may be 0: a zero tail keeps only the head, a zero
// head only the tail, and both zero keep nothing but still count bytes.
// Negative sizes are treated as 0, sizes above maxOutputLimit as that.
func newOutputBuffer(headBytes, tailBytes int) *outputBuffer {
	return &outputBuffer{headBytes: clampOutputLimit(headBytes), tailBytes: clampOutputLimit(tailBytes)}
}

// newBuffer returns the output buffer of one of m's processes: the
// configured head and tail, marked with m's clock for Process.OffsetAt.
func (m *Manager) newBuffer() *outputBuffer {
	b := newOutputBuffer(m.cfg.headBytes, m.cfg.tailBytes)
	b.clock = m.cfg.clock
	return b
}

func clampOutputLimit(n int) int { return min(max(n, 0), maxOutputLimit) }

// Write records p and returns len(p), nil: it never fails, so a process's
// output copier never stops because of the buffer. Once the head and the
// ring have grown in full, Write does not allocate, and it holds the mutex
// only for a copy of at most headBytes+tailBytes bytes, however long p is.
//
// Writes after closeWrite are ignored, so that an EOF a reader has seen stays
// true. An empty write changes nothing and wakes nobody.
func (b *outputBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if n == 0 {
		return 0, nil
	}
	// The clock is read before the lock, so that readers never wait on
	// it; one goroutine writes (copyOutput), so the times still come in
	// order. A write right after a large one comes from a writer faster
	// than its reader, and is not timed, but for one in maxUntimed: the
	// clock costs more than copying 64 bytes (BenchmarkBufferWrite), and
	// those writes are only known to have come before the next timed one.
	var at int64
	timed := b.clock != nil && (b.prevLen < largeWrite || b.untimed >= maxUntimed || len(b.marks) == 0)
	if timed {
		at = b.clock.Now(markTags...).UnixNano()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return n, nil
	}
	if b.clock != nil {
		b.prevLen = n
		b.markLocked(timed, at)
	}
	b.written += int64(n)
	if room := b.headBytes - len(b.head); room > 0 {
		take := min(room, len(p))
		b.growHeadLocked(take)
		b.head = append(b.head, p[:take]...)
		p = p[take:]
	}
	if len(p) > 0 {
		b.writeRingLocked(p)
	}
	b.wakeLocked()
	return n, nil
}

// markLocked notes a write about to start at offset written: its time at
// (Unix nanoseconds) when timed, else only that it came after the last
// time noted.
func (b *outputBuffer) markLocked(timed bool, at int64) {
	n := len(b.marks)
	if !timed {
		b.untimed++
		return
	}
	if n > 0 {
		cur := &b.marks[n-1]
		// A wall clock stepped back must not unsort the marks. Untimed
		// writes since cur.last came before this one: at bounds them.
		at = max(at, cur.last)
		if at-cur.first < int64(markGap) {
			cur.last, b.untimed = at, 0
			return
		}
		if b.untimed > 0 {
			cur.last, b.untimed = at, 0
		}
	}
	if n == maxMarks {
		// At most once a markGap, so a pass over the marks is cheap.
		best := 0
		for i := 1; i < n-1; i++ {
			if b.marks[i+1].last-b.marks[i].first < b.marks[best+1].last-b.marks[best].first {
				best = i
			}
		}
		b.marks[best].last = b.marks[best+1].last
		b.marks = append(b.marks[:best+1], b.marks[best+2:]...)
	}
	b.marks = append(b.marks, outputMark{off: b.written, first: at, last: at})
}

// offsetAt returns an offset from which the buffer holds every byte
// written at or after t: that of the first mark whose output was still
// being written at t (all bytes before it were written before t), the end
// when nothing has been written since t, and 0 without marks. What it
// returns beyond that, output of the same mark written before t, is the
// price of keeping bounded marks.
func (b *outputBuffer) offsetAt(t time.Time) int64 {
	tn := t.UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.marks)
	if n == 0 {
		return 0
	}
	i := sort.Search(n, func(i int) bool { return b.marks[i].last >= tn })
	switch {
	case i < n:
		return b.marks[i].off
	case b.untimed > 0:
		// Writes since the last mark's last time may be later than t.
		return b.marks[n-1].off
	}
	return b.written
}

// skip counts n bytes the buffer will never see: the middle of a long
// output whose files rolled on before a detached process's follower read
// them (detach_linux.go). The head stops growing there, so that it
// stays the true start of the output, and the tail restarts after the gap.
func (b *outputBuffer) skip(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.headBytes = len(b.head)
	b.written += n
	b.ringLen, b.ringEnd = 0, 0
	b.wakeLocked()
}

// growHeadLocked makes room in head for extra more bytes, never beyond
// headBytes, so append never picks a larger capacity on its own.
func (b *outputBuffer) growHeadLocked(extra int) {
	need := len(b.head) + extra
	if need <= cap(b.head) {
		return
	}
	newCap := min(max(2*cap(b.head), need, minHeadGrowth), b.headBytes)
	grown := make([]byte, len(b.head), newCap)
	copy(grown, b.head)
	b.head = grown
}

// writeRingLocked appends p, which the head had no room for, to the ring.
func (b *outputBuffer) writeRingLocked(p []byte) {
	if b.tailBytes == 0 {
		return
	}
	if len(p) >= b.tailBytes {
		// Only the last tailBytes of p survive; copy just those.
		b.growRingLocked(b.tailBytes)
		copy(b.ring, p[len(p)-b.tailBytes:])
		b.ringEnd = 0
		b.ringLen = b.tailBytes
		return
	}
	b.growRingLocked(min(b.ringLen+len(p), b.tailBytes))
	k := copy(b.ring[b.ringEnd:], p)
	copy(b.ring, p[k:])
	b.ringEnd = (b.ringEnd + len(p)) % b.tailBytes
	b.ringLen = min(b.ringLen+len(p), b.tailBytes)
}

// growRingLocked makes the ring at least need bytes long (need <=
// tailBytes), doubling as the head does. Below tailBytes the ring has never
// wrapped, so its bytes are ring[:ringLen] and keep their places.
func (b *outputBuffer) growRingLocked(need int) {
	if need <= len(b.ring) {
		return
	}
	grown := make([]byte, min(max(2*len(b.ring), need, minHeadGrowth), b.tailBytes))
	copy(grown, b.ring[:b.ringLen])
	b.ring = grown
}

// wakeLocked releases everyone waiting on the current notify channel.
func (b *outputBuffer) wakeLocked() {
	if b.notify != nil {
		close(b.notify)
		b.notify = nil
	}
}

// closeWrite records that no more writes will come because the process has
// exited. It wakes all waiters; from then on a rune left incomplete at the end
// is shown as U+FFFD and reads that reach the end report EOF. It is safe to
// call more than once.
func (b *outputBuffer) closeWrite() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.wakeLocked()
}

// total returns the exact number of bytes ever written.
func (b *outputBuffer) total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written
}

// bounds returns the absolute offsets delimiting what is retained: the head
// is [0, headEnd), the tail [tailStart, total), and nothing is missing when
// tailStart == headEnd.
func (b *outputBuffer) bounds() (headEnd, tailStart, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(len(b.head)), b.tailStartLocked(), b.written
}

// tailStartLocked returns the absolute offset of the oldest byte in the ring,
// or total when the ring holds nothing.
func (b *outputBuffer) tailStartLocked() int64 {
	return b.written - int64(b.ringLen)
}

// changed returns a channel that is closed by the next non-empty Write or by
// closeWrite, or one already closed if closeWrite has been called. To wait for
// output without missing any, call changed before read, then wait on the
// channel only if read returned nothing new.
func (b *outputBuffer) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changedLocked()
}

// changedLocked is changed for a caller already holding the mutex.
func (b *outputBuffer) changedLocked() <-chan struct{} {
	if b.closed {
		return closedChan
	}
	if b.notify == nil {
		b.notify = make(chan struct{})
	}
	return b.notify
}

// appendRangeLocked appends the retained bytes at absolute offsets [from, to)
// to dst. The range must lie within one retained region.
func (b *outputBuffer) appendRangeLocked(dst []byte, from, to int64) []byte {
	headEnd := int64(len(b.head))
	if from < headEnd {
		dst = append(dst, b.head[from:min(to, headEnd)]...)
		from = headEnd
	}
	if from >= to {
		return dst
	}
	i := b.ringIndexLocked(from)
	n := int(to - from)
	k := min(n, b.tailBytes-i)
	dst = append(dst, b.ring[i:i+k]...)
	return append(dst, b.ring[:n-k]...)
}

// ringIndexLocked returns where in ring the retained byte at absolute offset
// pos (in [tailStart, total)) is stored.
func (b *outputBuffer) ringIndexLocked(pos int64) int {
	oldest := b.ringEnd - b.ringLen
	if oldest < 0 {
		oldest += b.tailBytes
	}
	return (oldest + int(pos-b.tailStartLocked())) % b.tailBytes
}

// text renders a snapshot of the output for display. When nothing was dropped
// it is the whole output and the Truncation is nil, unless a line was cut.
// Otherwise it is the head, one line reading "[... N bytes omitted ...]", and
// the tail; N counts the dropped bytes plus the bytes of runes cut in two at
// either side, which are left out rather than shown as U+FFFD.
//
// Lines longer than maxLineBytes (measured in the rendered text, without the
// newline) are cut at a rune boundary to at most maxLineBytes and followed by
// " [... line truncated, N bytes]", N being the bytes removed. The marker
// line itself is never cut. maxLineBytes <= 0 means no limit.
//
// Invalid UTF-8 the process wrote becomes U+FFFD. While the writer is open, a
// rune at the very end whose remaining bytes have not been written yet is
// left out; that alone does not make the Truncation non-nil.
func (b *outputBuffer) text(maxLineBytes int) (string, *Truncation) {
	return b.renderText(maxLineBytes, false)
}

// renderText is text; with plain, the head and the tail are each rendered
// by PlainText before long lines are cut (so a line of a thousand progress
// redraws is judged by what it shows). The Truncation counts raw bytes
// either way.
func (b *outputBuffer) renderText(maxLineBytes int, plain bool) (string, *Truncation) {
	// The text is copied under the mutex straight into the string that is
	// returned: a copy Write waits behind no longer than for any snapshot.
	// The checks for invalid UTF-8 and long lines run after unlocking, and
	// only when one finds something (or plain asks for it) is the text
	// rendered again from it.
	b.mu.Lock()
	total, closed := b.written, b.closed
	headEnd, tailStart := int64(len(b.head)), b.tailStartLocked()

	if tailStart == headEnd {
		end := total
		if !closed {
			end -= b.incompleteSuffixLocked(0, total)
		}
		var sb strings.Builder
		sb.Grow(int(end))
		b.writeRangeLocked(&sb, 0, end)
		b.mu.Unlock()
		raw := sb.String()
		s, cut := cutLongLines(displayText(raw, plain), maxLineBytes)
		if cut == 0 {
			return s, nil
		}
		return s, &Truncation{
			OriginalBytes:  total,
			RetainedBytes:  int64(len(raw)),
			OmittedBytes:   total - int64(len(raw)),
			TruncatedLines: cut,
			Strategy:       truncationStrategy,
		}
	}

	// Both seams lose the rune they cut through: its other bytes are in the
	// dropped middle, and showing U+FFFD would claim the process wrote
	// invalid UTF-8.
	var lead [utf8.UTFMax - 1]byte
	headKeep := headEnd - b.incompleteSuffixLocked(0, headEnd)
	tailFrom := tailStart + int64(leadingContinuationLen(
		b.appendRangeLocked(lead[:0], tailStart, min(tailStart+utf8.UTFMax-1, total))))
	markerBytes := tailFrom - headKeep // before holding back the end
	tailTo := total
	if !closed && tailFrom < total {
		tailTo -= b.incompleteSuffixLocked(tailFrom, total)
	}
	headLen, tailLen := int(headKeep), int(tailTo-tailFrom)
	var sb strings.Builder
	sb.Grow(headLen + tailLen + 48)
	b.writeRangeLocked(&sb, 0, headKeep)
	if headLen > 0 && b.head[headLen-1] != '\n' {
		sb.WriteByte('\n')
	}
	var num [20]byte // FormatInt would allocate the number
	sb.WriteString("[... ")
	sb.Write(strconv.AppendInt(num[:0], markerBytes, 10))
	sb.WriteString(" bytes omitted ...]")
	if tailLen > 0 {
		sb.WriteByte('\n')
		b.writeRangeLocked(&sb, tailFrom, tailTo)
	}
	b.mu.Unlock()

	s := sb.String()
	trunc := &Truncation{
		OriginalBytes: total,
		RetainedBytes: int64(headLen + tailLen),
		OmittedBytes:  total - int64(headLen+tailLen),
		Strategy:      truncationStrategy,
	}
	if !plain && utf8.ValidString(s) && (maxLineBytes <= 0 || !hasLongLine(s, maxLineBytes)) {
		return s, trunc
	}
	// Rendered again piece by piece: the marker line is never cut, and the
	// newline before it depends on the head as shown.
	headText, headCut := cutLongLines(displayText(s[:headLen], plain), maxLineBytes)
	tailText, tailCut := cutLongLines(displayText(s[len(s)-tailLen:], plain), maxLineBytes)
	var out strings.Builder
	out.Grow(len(headText) + len(tailText) + 48)
	out.WriteString(headText)
	if headText != "" && !strings.HasSuffix(headText, "\n") {
		out.WriteByte('\n')
	}
	out.WriteString("[... ")
	out.WriteString(strconv.FormatInt(markerBytes, 10))
	out.WriteString(" bytes omitted ...]")
	if tailText != "" {
		out.WriteByte('\n')
		out.WriteString(tailText)
	}
	trunc.TruncatedLines = headCut + tailCut
	return out.String(), trunc
}

// writeRangeLocked writes the retained bytes at absolute offsets [from, to),
// which lie within one retained region, to sb.
func (b *outputBuffer) writeRangeLocked(sb *strings.Builder, from, to int64) {
	headEnd := int64(len(b.head))
	if from < headEnd {
		sb.Write(b.head[from:min(to, headEnd)])
		from = headEnd
	}
	if from < to {
		i := b.ringIndexLocked(from)
		n := int(to - from)
		k := min(n, b.tailBytes-i)
		sb.Write(b.ring[i : i+k])
		sb.Write(b.ring[:n-k])
	}
}

// read returns the output from offset to the end of the retained region that
// offset falls in (or, if offset was dropped, the next one), without waiting.
// See Chunk for how to follow output with it. An offset at or beyond the end
// returns no data and Next equal to offset; it reports EOF once the writer is
// closed, so a waiter given a too-large offset does not wait forever. The
// caller ensures offset >= 0.
func (b *outputBuffer) read(offset int64) Chunk {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.readLocked(offset)
}

// readLocked is read for a caller already holding the mutex.
func (b *outputBuffer) readLocked(offset int64) Chunk {
	total := b.written
	if offset >= total {
		return Chunk{Offset: offset, Next: offset, EOF: b.closed}
	}
	headEnd, tailStart := int64(len(b.head)), b.tailStartLocked()
	if tailStart == headEnd {
		// One contiguous region: nothing was dropped yet, so even bytes
		// past the head have their whole context.
		return b.chunkLocked(offset, offset, 0, total)
	}
	pos := offset
	if pos < headEnd {
		// The head ends at a seam, so a rune it cuts is dropped even
		// while the writer is open: its rest will never arrive here.
		start := b.skipMidRuneLocked(pos, 0, headEnd)
		end := headEnd - b.incompleteSuffixLocked(start, headEnd)
		if start < end {
			return b.makeChunkLocked(offset, start, end)
		}
		// Only the start of a rune cut by the dropped middle is left
		// before it; skip it together with the middle.
		pos = headEnd
	}
	if pos < tailStart {
		pos = tailStart
	}
	return b.chunkLocked(offset, pos, tailStart, total)
}

// chunkLocked builds the chunk read(offset) returns from the retained region
// [regionStart, regionEnd) when reading begins at pos in it; regionEnd is the
// end of the output. Bytes from offset to the first rune boundary at or after
// pos are reported as omitted.
func (b *outputBuffer) chunkLocked(offset, pos, regionStart, regionEnd int64) Chunk {
	start := b.skipMidRuneLocked(pos, regionStart, regionEnd)
	end := regionEnd
	if !b.closed {
		end -= b.incompleteSuffixLocked(start, end)
	}
	return b.makeChunkLocked(offset, start, end)
}

// makeChunkLocked returns the chunk for a read at offset that skipped to
// start and returns the retained bytes [start, end).
func (b *outputBuffer) makeChunkLocked(offset, start, end int64) Chunk {
	c := Chunk{Offset: start, Next: end, Omitted: start - offset}
	if start < end {
		c.Data = b.stringLocked(start, end)
	}
	c.EOF = b.closed && c.Next == b.written
	return c
}

// stringLocked returns the retained bytes [from, to) as valid UTF-8.
func (b *outputBuffer) stringLocked(from, to int64) string {
	var sb strings.Builder
	sb.Grow(int(to - from))
	b.writeRangeLocked(&sb, from, to)
	s := sb.String()
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, string(utf8.RuneError))
	}
	return s
}

// skipMidRuneLocked returns the first rune boundary at or after pos within
// the retained region [regionStart, regionEnd), or regionEnd if there is none
// yet. regionStart == 0 means the region starts the output; any other
// regionStart follows dropped bytes, so continuation bytes there have lost
// their lead byte.
func (b *outputBuffer) skipMidRuneLocked(pos, regionStart, regionEnd int64) int64 {
	if pos >= regionEnd {
		return pos
	}
	var buf [2*utf8.UTFMax - 1]byte
	if regionStart > 0 {
		// Up to UTFMax-1 continuation bytes at the start of a region after
		// a gap belong to a rune whose lead byte was dropped. This run can
		// grow while bytes arrive, and a reader whose Next fell inside it
		// must keep skipping, so it is measured on every read.
		lead := b.appendRangeLocked(buf[:0], regionStart, min(regionStart+utf8.UTFMax-1, regionEnd))
		if leadEnd := regionStart + int64(leadingContinuationLen(lead)); pos < leadEnd {
			return leadEnd
		}
	}
	lo := max(regionStart, pos-(utf8.UTFMax-1))
	hi := min(pos+utf8.UTFMax-1, regionEnd)
	w := b.appendRangeLocked(buf[:0], lo, hi)
	at := int(pos - lo)
	if utf8.RuneStart(w[at]) {
		return pos
	}
	// pos holds a continuation byte. It is inside a rune only if a lead
	// byte shortly before it starts an encoding that reaches past pos;
	// otherwise it is a stray byte the process wrote, shown as U+FFFD.
	for j := at - 1; j >= 0; j-- {
		if !utf8.RuneStart(w[j]) {
			continue
		}
		if !utf8.FullRune(w[j:]) {
			// The rune at j is still being written, or lost its end to the
			// dropped middle; either way the rest of the region is in it.
			if regionEnd == b.written && b.closed {
				return pos // it never completed: its bytes are invalid
			}
			return regionEnd
		}
		_, size := utf8.DecodeRune(w[j:])
		if end := lo + int64(j+size); end > pos {
			return end
		}
		return pos
	}
	return pos
}

// incompleteSuffixLocked is incompleteSuffixLen of the retained bytes
// [from, to).
func (b *outputBuffer) incompleteSuffixLocked(from, to int64) int64 {
	var buf [utf8.UTFMax - 1]byte
	return int64(incompleteSuffixLen(b.appendRangeLocked(buf[:0], max(from, to-(utf8.UTFMax-1)), to)))
}

// waitRead is read, but when read(offset) would return no data, nothing
// omitted and no EOF, it waits until that changes or ctx ends. When ctx ends
// it returns read(offset) and ctx.Err(). Output already available is returned
// even if ctx has ended.
//
// Waiters share one channel closed by the next write, so any number of them
// cost no goroutine or timer of their own.
func (b *outputBuffer) waitRead(ctx context.Context, offset int64) (Chunk, error) {
	for {
		b.mu.Lock()
		c := b.readLocked(offset)
		if c.Data != "" || c.Omitted > 0 || c.EOF {
			b.mu.Unlock()
			return c, nil
		}
		// Taken under the same lock as the read, so no write can slip in
		// between and go unnoticed.
		ch := b.changedLocked()
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return b.read(offset), ctx.Err()
		}
	}
}

// incompleteSuffixLen returns how many bytes at the end of p are the start of
// a multi-byte rune whose remaining bytes are missing. Bytes that can never
// be part of a valid rune do not count: they are invalid, not incomplete.
func incompleteSuffixLen(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return 0
			}
			return len(p) - i
		}
	}
	return 0
}

// leadingContinuationLen returns how many of the first UTFMax-1 bytes of p
// are UTF-8 continuation bytes in a row: the remains of a rune whose lead
// byte is not in p.
func leadingContinuationLen(p []byte) int {
	n := 0
	for n < len(p) && n < utf8.UTFMax-1 && !utf8.RuneStart(p[n]) {
		n++
	}
	return n
}

// validText returns s with each run of invalid UTF-8 replaced by U+FFFD.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, string(utf8.RuneError))
}

// displayText is validText, rendered by PlainText when plain is set.
func displayText(s string, plain bool) string {
	s = validText(s)
	if plain {
		s = PlainText(s)
	}
	return s
}

// hasLongLine reports whether a line of s, not counting its newline, is
// longer than maxLineBytes (> 0). It reads about one line per maxLineBytes
// of s: the last newline in a window of maxLineBytes+1 bytes ends lines
// that all fit, and a window without one starts a line that does not.
func hasLongLine(s string, maxLineBytes int) bool {
	for len(s) > maxLineBytes {
		i := strings.LastIndexByte(s[:maxLineBytes+1], '\n')
		if i < 0 {
			return true
		}
		s = s[i+1:]
	}
	return false
}

// cutLongLines cuts each line of s longer than maxLineBytes, not counting its
// newline, to at most maxLineBytes at a rune boundary and marks it. It returns
// the result and how many lines were cut; s must be valid UTF-8.
func cutLongLines(s string, maxLineBytes int) (string, int) {
	if maxLineBytes <= 0 || !hasLongLine(s, maxLineBytes) {
		return s, 0
	}
	var sb strings.Builder
	cut := 0
	rest := s
	done := 0 // bytes of s already copied to sb or known to need no change
	for rest != "" {
		line, after, found := strings.Cut(rest, "\n")
		if len(line) > maxLineBytes {
			if cut == 0 {
				sb.Grow(len(s))
			}
			keep := maxLineBytes
			for keep > 0 && !utf8.RuneStart(line[keep]) {
				keep--
			}
			lineStart := len(s) - len(rest)
			sb.WriteString(s[done : lineStart+keep])
			sb.WriteString(" [... line truncated, ")
			sb.WriteString(strconv.Itoa(len(line) - keep))
			sb.WriteString(" bytes]")
			done = lineStart + len(line)
			cut++
		}
		if !found {
			break
		}
		rest = after
	}
	if cut == 0 {
		return s, 0
	}
	sb.WriteString(s[done:])
	return sb.String(), cut
}
