package agentproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// testTimeout bounds every blocking wait in these tests.
const testTimeout = 10 * time.Second

// expected is what a buffer holding written should show, derived from all the
// bytes rather than from the buffer's head and ring.
type expected struct {
	headEnd, tailStart int64
	text               string
	trunc              *Truncation
}

// gaps says where skip left bytes out of an output: every skipped byte is
// in [first, lastEnd), whose bytes in written are filler the buffer never
// saw. first is -1 when nothing was skipped.
type gaps struct{ first, lastEnd int64 }

var noGaps = gaps{first: -1}

// reference derives the buffer's state from every byte written, kept in
// full, with gaps g: the head ends at the first gap at the latest, and the
// tail starts after the last. It leans on incompleteSuffixLen,
// leadingContinuationLen and cutLongLines, which have table tests of their
// own, and on nothing else in buffer.go.
func reference(written []byte, g gaps, headBytes, tailBytes int, closed bool, maxLineBytes int) expected {
	total := int64(len(written))
	headEnd := min(total, int64(headBytes))
	if g.first >= 0 {
		headEnd = min(headEnd, g.first)
	}
	tailStart := max(headEnd, total-int64(tailBytes), g.lastEnd)
	e := expected{headEnd: headEnd, tailStart: tailStart}
	if tailStart == headEnd {
		kept := written
		if !closed {
			kept = kept[:len(kept)-incompleteSuffixLen(kept)]
		}
		s, cut := cutLongLines(strings.ToValidUTF8(string(kept), "\uFFFD"), maxLineBytes)
		e.text = s
		if cut > 0 {
			e.trunc = &Truncation{total, int64(len(kept)), total - int64(len(kept)), cut, "head_tail"}
		}
		return e
	}
	head := written[:headEnd]
	head = head[:len(head)-incompleteSuffixLen(head)]
	tail := written[tailStart:]
	tail = tail[leadingContinuationLen(tail):]
	omitted := total - int64(len(head)+len(tail))
	if !closed {
		tail = tail[:len(tail)-incompleteSuffixLen(tail)]
	}
	h, hcut := cutLongLines(strings.ToValidUTF8(string(head), "\uFFFD"), maxLineBytes)
	t, tcut := cutLongLines(strings.ToValidUTF8(string(tail), "\uFFFD"), maxLineBytes)
	var sb strings.Builder
	sb.WriteString(h)
	if h != "" && h[len(h)-1] != '\n' {
		sb.WriteString("\n")
	}
	fmt.Fprintf(&sb, "[... %d bytes omitted ...]", omitted)
	if t != "" {
		sb.WriteString("\n" + t)
	}
	e.text = sb.String()
	retained := int64(len(head) + len(tail))
	e.trunc = &Truncation{total, retained, total - retained, hcut + tcut, "head_tail"}
	return e
}

// checkState compares b, holding written, with the reference and checks the
// invariants that hold for any input: exact total, bounded memory, the head a
// prefix and the tail a suffix of written, and valid UTF-8 text.
func checkState(t *testing.T, b *outputBuffer, written []byte, closed bool) {
	t.Helper()
	checkStateGaps(t, b, written, noGaps, b.headBytes, closed)
}

// checkStateGaps is checkState for a buffer made with headBytes whose
// output has gaps g (see skip).
func checkStateGaps(t *testing.T, b *outputBuffer, written []byte, g gaps, headBytes int, closed bool) {
	t.Helper()
	b.mu.Lock()
	headCap, ringLen, ringSize := cap(b.head), b.ringLen, len(b.ring)
	head := bytes.Clone(b.head)
	tail := b.appendRangeLocked(nil, b.tailStartLocked(), b.written)
	b.mu.Unlock()

	if got, want := b.total(), int64(len(written)); got != want {
		t.Fatalf("total() = %d, want %d", got, want)
	}
	if headCap > headBytes {
		t.Fatalf("cap(head) = %d, want <= headBytes %d", headCap, headBytes)
	}
	if ringSize != 0 && ringSize != b.tailBytes || ringLen > b.tailBytes {
		t.Fatalf("len(ring) = %d, ringLen = %d, want <= tailBytes %d", ringSize, ringLen, b.tailBytes)
	}
	want := reference(written, g, headBytes, b.tailBytes, closed, 0)
	headEnd, tailStart, _ := b.bounds()
	if headEnd != want.headEnd || tailStart != want.tailStart {
		t.Fatalf("bounds() = %d, %d, want %d, %d", headEnd, tailStart, want.headEnd, want.tailStart)
	}
	if !bytes.Equal(head, written[:headEnd]) {
		t.Fatalf("head = %q, want prefix %q", head, written[:headEnd])
	}
	if !bytes.Equal(tail, written[tailStart:]) {
		t.Fatalf("tail = %q, want suffix %q", tail, written[tailStart:])
	}
	for _, maxLine := range []int{0, 1, 5, 40} {
		want := reference(written, g, headBytes, b.tailBytes, closed, maxLine)
		got, trunc := b.text(maxLine)
		if !utf8.ValidString(got) {
			t.Fatalf("text(%d) = %q, not valid UTF-8", maxLine, got)
		}
		if got != want.text {
			t.Fatalf("text(%d) = %q, want %q", maxLine, got, want.text)
		}
		if fmt.Sprint(trunc) != fmt.Sprint(want.trunc) {
			t.Fatalf("text(%d) truncation = %+v, want %+v", maxLine, trunc, want.trunc)
		}
		if utf8.Valid(written) && strings.ContainsRune(got, utf8.RuneError) {
			t.Fatalf("text(%d) = %q has U+FFFD, but the input was valid UTF-8", maxLine, got)
		}
	}
}

// reader follows a buffer's output from offset 0 and checks every chunk.
type reader struct {
	next      int64
	accounted int64 // bytes in Data or Omitted so far
	chunks    int
	eof       bool
}

// check verifies c, returned for a read at r.next when written[:total] had
// been written, and advances r. full holds every byte that will be written;
// validInput says it is valid UTF-8.
func (r *reader) check(t *testing.T, c Chunk, full []byte, validInput bool) {
	t.Helper()
	if c.Omitted < 0 || c.Offset != r.next+c.Omitted {
		t.Fatalf("read(%d): Offset %d, Omitted %d, want Offset = offset + Omitted >= offset", r.next, c.Offset, c.Omitted)
	}
	if c.Next < c.Offset || c.Next > int64(len(full)) {
		t.Fatalf("read(%d): Next %d, want in [Offset %d, %d]", r.next, c.Next, c.Offset, len(full))
	}
	raw := full[c.Offset:c.Next]
	if got, want := c.Data, strings.ToValidUTF8(string(raw), "\uFFFD"); got != want {
		t.Fatalf("read(%d) Data = %q, want %q (bytes %d..%d)", r.next, got, want, c.Offset, c.Next)
	}
	if validInput && !utf8.Valid(raw) {
		t.Fatalf("read(%d) returned bytes %d..%d = %q, which split a rune", r.next, c.Offset, c.Next, raw)
	}
	if c.Data == "" && c.Next != c.Offset {
		t.Fatalf("read(%d): empty Data but Next %d != Offset %d", r.next, c.Next, c.Offset)
	}
	r.accounted += c.Omitted + (c.Next - c.Offset)
	if r.accounted != c.Next {
		t.Fatalf("after read(%d): accounted for %d bytes, want Next %d", r.next, r.accounted, c.Next)
	}
	r.next = c.Next
	r.eof = c.EOF
	r.chunks++
}

// randomUTF8 returns n runes of valid UTF-8 with one- to four-byte runes and
// newlines, some lines long.
func randomUTF8(rng *rand.Rand, n int) []byte {
	runes := []rune{'a', 'b', '\n', 'é', '€', '𝄞', '中', ' '}
	var out []byte
	for range n {
		out = utf8.AppendRune(out, runes[rng.IntN(len(runes))])
	}
	return out
}

// randomBytes returns n bytes drawn mostly from pieces of UTF-8 encodings, so
// that both valid runes and every kind of invalid sequence occur.
func randomBytes(rng *rand.Rand, n int) []byte {
	alphabet := []byte{'a', '\n', 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9d, 0x84, 0x9e, 0xff, 0x80}
	out := make([]byte, n)
	for i := range out {
		out[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return out
}

// writeSizes splits n bytes into random write sizes: mostly small, sometimes
// larger than any head or tail used here.
func writeSizes(rng *rand.Rand, n int) []int {
	var sizes []int
	for n > 0 {
		s := 1 + rng.IntN(8)
		if rng.IntN(6) == 0 {
			s = 1 + rng.IntN(200)
		}
		s = min(s, n)
		sizes = append(sizes, s)
		n -= s
	}
	return sizes
}

// TestBufferMatchesReference writes random data in random pieces into buffers
// of many head and tail sizes, checking state, text and a reader after every
// write and after closing.
func TestBufferMatchesReference(t *testing.T) {
	t.Parallel()
	sizes := []int{0, 1, 2, 3, 5, 8, 33}
	for _, valid := range []bool{true, false} {
		for _, headBytes := range sizes {
			for _, tailBytes := range sizes {
				name := fmt.Sprintf("valid=%v/head=%d/tail=%d", valid, headBytes, tailBytes)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					rng := rand.New(rand.NewPCG(uint64(headBytes), uint64(tailBytes)))
					for range 20 {
						var full []byte
						if valid {
							full = randomUTF8(rng, rng.IntN(120))
						} else {
							full = randomBytes(rng, rng.IntN(200))
						}
						b := newOutputBuffer(headBytes, tailBytes)
						var r reader
						written := 0
						everDropped := false
						for _, n := range writeSizes(rng, len(full)) {
							if got, err := b.Write(full[written : written+n]); got != n || err != nil {
								t.Fatalf("Write(%d bytes) = %d, %v, want %d, nil", n, got, err, n)
							}
							written += n
							checkState(t, b, full[:written], false)
							headEnd, tailStart, _ := b.bounds()
							everDropped = everDropped || tailStart != headEnd
							c := b.read(r.next)
							if !everDropped && c.Omitted != 0 {
								t.Fatalf("read(%d) omitted %d bytes, but nothing was dropped; written %q", r.next, c.Omitted, full[:written])
							}
							if c.EOF {
								t.Fatalf("read(%d) reported EOF before closeWrite", r.next)
							}
							r.check(t, c, full[:written], valid)
						}
						b.closeWrite()
						checkState(t, b, full, true)
						for !r.eof {
							if r.chunks > 2*len(full)+10 {
								t.Fatalf("reader made no progress: %d chunks for %d bytes", r.chunks, len(full))
							}
							r.check(t, b.read(r.next), full, valid)
						}
						if r.next != int64(len(full)) {
							t.Fatalf("EOF at %d, want %d", r.next, len(full))
						}
					}
				})
			}
		}
	}
}

// TestBufferSkipMatchesReference is TestBufferMatchesReference with gaps:
// between writes, skip leaves out bytes the buffer never sees (a detached
// process's output files that rolled on before they were read). The head
// must stop at the first gap, the tail start after the last, every skipped
// byte be counted in total and accounted for as omitted by a reader, and
// nothing from a gap (filler here) ever be shown.
func TestBufferSkipMatchesReference(t *testing.T) {
	t.Parallel()
	sizes := []int{0, 1, 2, 3, 5, 8, 33}
	for _, valid := range []bool{true, false} {
		for _, headBytes := range sizes {
			for _, tailBytes := range sizes {
				name := fmt.Sprintf("valid=%v/head=%d/tail=%d", valid, headBytes, tailBytes)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					rng := rand.New(rand.NewPCG(uint64(headBytes)+100, uint64(tailBytes)))
					for range 20 {
						var data []byte
						if valid {
							data = randomUTF8(rng, rng.IntN(120))
						} else {
							data = randomBytes(rng, rng.IntN(200))
						}
						b := newOutputBuffer(headBytes, tailBytes)
						var out []byte // data as written, with filler for each gap
						g := noGaps
						var r reader
						written := 0
						skipGap := func() {
							n := int64(rng.IntN(40))
							if rng.IntN(5) == 0 {
								n = -n // counts nothing, as n == 0 does
							}
							b.skip(n)
							if n <= 0 {
								return
							}
							if g.first < 0 {
								g.first = int64(len(out))
							}
							out = append(out, bytes.Repeat([]byte{0}, int(n))...)
							g.lastEnd = int64(len(out))
						}
						for _, n := range writeSizes(rng, len(data)) {
							if rng.IntN(4) == 0 {
								skipGap()
								checkStateGaps(t, b, out, g, headBytes, false)
								r.check(t, b.read(r.next), out, valid)
							}
							if got, err := b.Write(data[written : written+n]); got != n || err != nil {
								t.Fatalf("Write(%d bytes) = %d, %v, want %d, nil", n, got, err, n)
							}
							out = append(out, data[written:written+n]...)
							written += n
							checkStateGaps(t, b, out, g, headBytes, false)
							c := b.read(r.next)
							if c.EOF {
								t.Fatalf("read(%d) reported EOF before closeWrite", r.next)
							}
							r.check(t, c, out, valid)
						}
						if rng.IntN(2) == 0 {
							skipGap() // the output may end in a gap
						}
						b.closeWrite()
						checkStateGaps(t, b, out, g, headBytes, true)
						for !r.eof {
							if r.chunks > 2*len(out)+10 {
								t.Fatalf("reader made no progress: %d chunks for %d bytes", r.chunks, len(out))
							}
							r.check(t, b.read(r.next), out, valid)
						}
						if r.next != int64(len(out)) {
							t.Fatalf("EOF at %d, want %d", r.next, len(out))
						}
					}
				})
			}
		}
	}
}

// TestBufferText checks the rendered text and its Truncation on examples
// chosen by hand.
func TestBufferText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		head, tail, maxLine int
		writes              []string
		open                bool
		want                string
		wantTrunc           *Truncation
	}{
		{name: "empty", head: 4, tail: 4, want: ""},
		{name: "fits in head", head: 10, tail: 0, writes: []string{"abc\n"}, want: "abc\n"},
		{name: "contiguous exactly", head: 3, tail: 3, writes: []string{"ab", "cd", "ef"}, want: "abcdef"},
		{name: "contiguous across ring wrap", head: 2, tail: 4, writes: []string{"a", "b", "c", "d", "e", "f"}, want: "abcdef"},
		{
			name: "middle dropped", head: 4, tail: 4, writes: []string{"abcdefghij"},
			want:      "abcd\n[... 2 bytes omitted ...]\nghij",
			wantTrunc: &Truncation{10, 8, 2, 0, "head_tail"},
		},
		{
			name: "head ends with newline", head: 3, tail: 3, writes: []string{"ab\ncdefg\nhi"},
			want:      "ab\n[... 5 bytes omitted ...]\n\nhi",
			wantTrunc: &Truncation{11, 6, 5, 0, "head_tail"},
		},
		{
			name: "tail only", head: 0, tail: 3, writes: []string{"abc", "def"},
			want:      "[... 3 bytes omitted ...]\ndef",
			wantTrunc: &Truncation{6, 3, 3, 0, "head_tail"},
		},
		{
			name: "head only", head: 3, tail: 0, writes: []string{"abcdef"},
			want:      "abc\n[... 3 bytes omitted ...]",
			wantTrunc: &Truncation{6, 3, 3, 0, "head_tail"},
		},
		{
			name: "nothing kept", head: 0, tail: 0, writes: []string{"abc"},
			want:      "[... 3 bytes omitted ...]",
			wantTrunc: &Truncation{3, 0, 3, 0, "head_tail"},
		},
		{
			// The head's "é" loses its second byte and the tail's "€" its
			// first: both count as omitted, neither becomes U+FFFD.
			name: "runes cut at both seams", head: 2, tail: 3, writes: []string{"aé-x-€b"},
			want:      "a\n[... 8 bytes omitted ...]\nb",
			wantTrunc: &Truncation{10, 2, 8, 0, "head_tail"},
		},
		{
			name: "long line cut", head: 100, tail: 100, maxLine: 5, writes: []string{"abcdefgh\nxy\n"},
			want:      "abcde [... line truncated, 3 bytes]\nxy\n",
			wantTrunc: &Truncation{12, 12, 0, 1, "head_tail"},
		},
		{
			name: "line of exactly the limit", head: 100, tail: 100, maxLine: 5, writes: []string{"abcde\nabcde"},
			want: "abcde\nabcde",
		},
		{
			name: "cut at rune boundary", head: 100, tail: 0, maxLine: 4, writes: []string{"aé€\n€€"},
			want:      "aé [... line truncated, 3 bytes]\n€ [... line truncated, 3 bytes]",
			wantTrunc: &Truncation{13, 13, 0, 2, "head_tail"},
		},
		{
			name: "cut to nothing", head: 100, tail: 0, maxLine: 2, writes: []string{"€"},
			want:      " [... line truncated, 3 bytes]",
			wantTrunc: &Truncation{3, 3, 0, 1, "head_tail"},
		},
		{
			name: "marker line never cut", head: 4, tail: 4, maxLine: 3, writes: []string{"ab\ncdefghijklmnop"},
			want:      "ab\nc\n[... 9 bytes omitted ...]\nmno [... line truncated, 1 bytes]",
			wantTrunc: &Truncation{17, 8, 9, 1, "head_tail"},
		},
		{name: "invalid bytes", head: 10, tail: 10, writes: []string{"a\xffb\xc3"}, want: "a\uFFFDb\uFFFD"},
		{
			name: "invalid byte ends the head", head: 2, tail: 1, writes: []string{"a\xffxyz"},
			want:      "a\uFFFD\n[... 2 bytes omitted ...]\nz",
			wantTrunc: &Truncation{5, 3, 2, 0, "head_tail"},
		},
		{name: "incomplete rune held back while open", head: 10, tail: 10, writes: []string{"a\xe2\x82"}, open: true, want: "a"},
		{name: "incomplete rune shown when closed", head: 10, tail: 10, writes: []string{"a\xe2\x82"}, want: "a\uFFFD"},
		{name: "rune completed by a later write", head: 10, tail: 10, writes: []string{"a\xe2", "\x82", "\xac"}, open: true, want: "a€"},
		{
			name: "incomplete tail rune held back", head: 1, tail: 3, writes: []string{"abc\xf0\x9d"}, open: true,
			want:      "a\n[... 1 bytes omitted ...]\nc",
			wantTrunc: &Truncation{5, 2, 3, 0, "head_tail"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newOutputBuffer(tt.head, tt.tail)
			for _, w := range tt.writes {
				b.Write([]byte(w))
			}
			if !tt.open {
				b.closeWrite()
			}
			got, trunc := b.text(tt.maxLine)
			if got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
			if fmt.Sprint(trunc) != fmt.Sprint(tt.wantTrunc) {
				t.Errorf("truncation = %+v, want %+v", trunc, tt.wantTrunc)
			}
		})
	}
}

// TestBufferSplitRunes writes repeated multi-byte runes split at every byte
// position, into heads and tails whose seams fall at every byte position, and
// checks that no U+FFFD appears and no rune is split.
func TestBufferSplitRunes(t *testing.T) {
	t.Parallel()
	for _, r := range []string{"é", "€", "𝄞"} {
		t.Run(r, func(t *testing.T) {
			t.Parallel()
			splitRunes(t, []byte(strings.Repeat(r, 7)))
		})
	}
}

// splitRunes is TestBufferSplitRunes for one repeated rune.
func splitRunes(t *testing.T, full []byte) {
	for headBytes := 0; headBytes <= 8; headBytes++ {
		for tailBytes := 0; tailBytes <= 8; tailBytes++ {
			for split := 0; split <= len(full); split++ {
				t.Run(fmt.Sprintf("head=%d/tail=%d/split=%d", headBytes, tailBytes, split), func(t *testing.T) {
					b := newOutputBuffer(headBytes, tailBytes)
					b.Write(full[:split])
					checkState(t, b, full[:split], false)
					var rd reader
					rd.check(t, b.read(0), full[:split], true)
					b.Write(full[split:])
					checkState(t, b, full, false)
					rd.check(t, b.read(rd.next), full, true)
					b.closeWrite()
					checkState(t, b, full, true)
					for !rd.eof {
						rd.check(t, b.read(rd.next), full, true)
					}
				})
			}
		}
	}
}

// TestBufferRead checks reads at chosen offsets across the head, the dropped
// middle and the tail.
func TestBufferRead(t *testing.T) {
	t.Parallel()
	// head "abcd", dropped "efgh", tail "ijkl".
	plain := newOutputBuffer(4, 4)
	plain.Write([]byte("abcdefghijkl"))
	// head "aé" cut after é's first byte, tail "€b" starting at €'s last
	// two bytes: "a\xc3" | "\xa9xyz\xe2" | "\x82\xacb".
	seams := newOutputBuffer(2, 3)
	seams.Write([]byte("aéxyz€b"))
	// Contiguous, with a rune still incomplete at the end.
	pending := newOutputBuffer(10, 10)
	pending.Write([]byte("aé\xe2\x82"))
	closed := newOutputBuffer(4, 4)
	closed.Write([]byte("abcdefghijkl"))
	closed.closeWrite()

	tests := []struct {
		name   string
		b      *outputBuffer
		offset int64
		want   Chunk
	}{
		{"head start", plain, 0, Chunk{Data: "abcd", Offset: 0, Next: 4}},
		{"inside head", plain, 2, Chunk{Data: "cd", Offset: 2, Next: 4}},
		{"head end", plain, 4, Chunk{Data: "ijkl", Offset: 8, Next: 12, Omitted: 4}},
		{"inside gap", plain, 6, Chunk{Data: "ijkl", Offset: 8, Next: 12, Omitted: 2}},
		{"tail start", plain, 8, Chunk{Data: "ijkl", Offset: 8, Next: 12}},
		{"inside tail", plain, 10, Chunk{Data: "kl", Offset: 10, Next: 12}},
		{"at end", plain, 12, Chunk{Offset: 12, Next: 12}},
		{"past end", plain, 20, Chunk{Offset: 20, Next: 20}},
		{"head before cut rune", seams, 0, Chunk{Data: "a", Offset: 0, Next: 1}},
		{"cut rune at head end", seams, 1, Chunk{Data: "b", Offset: 9, Next: 10, Omitted: 8}},
		{"gap", seams, 3, Chunk{Data: "b", Offset: 9, Next: 10, Omitted: 6}},
		{"cut rune at tail start", seams, 7, Chunk{Data: "b", Offset: 9, Next: 10, Omitted: 2}},
		{"inside cut rune at tail start", seams, 8, Chunk{Data: "b", Offset: 9, Next: 10, Omitted: 1}},
		{"pending rune held back", pending, 0, Chunk{Data: "aé", Offset: 0, Next: 3}},
		{"at pending rune", pending, 3, Chunk{Offset: 3, Next: 3}},
		{"inside pending rune", pending, 4, Chunk{Offset: 5, Next: 5, Omitted: 1}},
		{"mid-rune offset", pending, 2, Chunk{Data: "", Offset: 3, Next: 3, Omitted: 1}},
		{"closed tail", closed, 8, Chunk{Data: "ijkl", Offset: 8, Next: 12, EOF: true}},
		{"closed at end", closed, 12, Chunk{Offset: 12, Next: 12, EOF: true}},
		{"closed past end", closed, 13, Chunk{Offset: 13, Next: 13, EOF: true}},
		{"closed head", closed, 0, Chunk{Data: "abcd", Offset: 0, Next: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.b.read(tt.offset); got != tt.want {
				t.Errorf("read(%d) = %+v, want %+v", tt.offset, got, tt.want)
			}
		})
	}
}

// TestBufferConcurrentReaders runs one writer and several readers, some
// waiting and some polling, and checks that each reader accounts for every
// byte exactly once. Run with -race.
func TestBufferConcurrentReaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ head, tail int }{{64, 64}, {0, 7}, {5, 0}, {1 << 16, 1 << 16}} {
		t.Run(fmt.Sprintf("head=%d/tail=%d", tc.head, tc.tail), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(tc.head), uint64(tc.tail)))
			full := randomUTF8(rng, 20000)
			sizes := writeSizes(rng, len(full))
			b := newOutputBuffer(tc.head, tc.tail)
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()

			const readers = 4
			results := make(chan error, readers)
			for i := range readers {
				go func() {
					results <- followOutput(ctx, b, full, i%2 == 0)
				}()
			}
			written := 0
			for _, n := range sizes {
				b.Write(full[written : written+n])
				written += n
			}
			b.closeWrite()
			for range readers {
				select {
				case err := <-results:
					if err != nil {
						t.Error(err)
					}
				case <-ctx.Done():
					t.Fatal("readers did not finish before the deadline")
				}
			}
		})
	}
}

// followOutput reads b from offset 0 to EOF, with waitRead or by polling read
// after waiting on changed, and reports the first chunk that does not match
// full. It runs outside the test goroutine, so it returns errors instead of
// calling t.Fatal.
func followOutput(ctx context.Context, b *outputBuffer, full []byte, wait bool) error {
	var next, accounted int64
	for {
		var c Chunk
		if wait {
			var err error
			if c, err = b.waitRead(ctx, next); err != nil {
				return fmt.Errorf("waitRead(%d): %w", next, err)
			}
		} else {
			changed := b.changed()
			c = b.read(next)
			if c.Data == "" && c.Omitted == 0 && !c.EOF {
				select {
				case <-changed:
				case <-ctx.Done():
					return fmt.Errorf("read(%d): no change before the deadline", next)
				}
				continue
			}
		}
		if c.Offset != next+c.Omitted || c.Next < c.Offset || c.Next > int64(len(full)) {
			return fmt.Errorf("read(%d) = Offset %d, Next %d, Omitted %d: inconsistent", next, c.Offset, c.Next, c.Omitted)
		}
		raw := full[c.Offset:c.Next]
		if !utf8.Valid(raw) || c.Data != string(raw) {
			return fmt.Errorf("read(%d) Data = %q, want %q", next, c.Data, raw)
		}
		accounted += c.Omitted + c.Next - c.Offset
		if accounted != c.Next {
			return fmt.Errorf("read(%d): accounted for %d bytes, want %d", next, accounted, c.Next)
		}
		next = c.Next
		if c.EOF {
			if next != int64(len(full)) {
				return fmt.Errorf("EOF at %d, want %d", next, len(full))
			}
			return nil
		}
	}
}

// waitForWaiter returns once some caller is waiting on b's notify channel.
func waitForWaiter(t *testing.T, b *outputBuffer) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		b.mu.Lock()
		waiting := b.notify != nil
		b.mu.Unlock()
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no waiter registered before the deadline")
		}
		runtime.Gosched()
	}
}

// waitResult is what a waitRead call returned.
type waitResult struct {
	c   Chunk
	err error
}

// startWaitRead runs b.waitRead(ctx, offset) in a goroutine.
func startWaitRead(ctx context.Context, b *outputBuffer, offset int64) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		c, err := b.waitRead(ctx, offset)
		done <- waitResult{c, err}
	}()
	return done
}

// receive returns the result from done, failing the test at the deadline.
func receive(t *testing.T, done <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(testTimeout):
		t.Fatal("waitRead did not return before the deadline")
		return waitResult{}
	}
}

// TestWaitReadWokenByOneByte checks that a waiter wakes for a single byte.
func TestWaitReadWokenByOneByte(t *testing.T) {
	t.Parallel()
	b := newOutputBuffer(8, 8)
	done := startWaitRead(t.Context(), b, 0)
	waitForWaiter(t, b)
	b.Write([]byte("x"))
	r := receive(t, done)
	if want := (Chunk{Data: "x", Next: 1}); r.c != want || r.err != nil {
		t.Errorf("waitRead = %+v, %v, want %+v, nil", r.c, r.err, want)
	}
}

// TestWaitReadWaitsForWholeRune checks that a waiter keeps waiting while only
// part of a rune has been written.
func TestWaitReadWaitsForWholeRune(t *testing.T) {
	t.Parallel()
	b := newOutputBuffer(8, 8)
	b.Write([]byte("\xe2"))
	done := startWaitRead(t.Context(), b, 0)
	waitForWaiter(t, b)
	b.Write([]byte("\x82"))
	waitForWaiter(t, b) // woken, found half a rune, waiting again
	select {
	case r := <-done:
		t.Fatalf("waitRead returned %+v, %v on an incomplete rune", r.c, r.err)
	default:
	}
	b.Write([]byte("\xac"))
	r := receive(t, done)
	if want := (Chunk{Data: "€", Next: 3}); r.c != want || r.err != nil {
		t.Errorf("waitRead = %+v, %v, want %+v, nil", r.c, r.err, want)
	}
}

// TestWaitReadManyWaiters checks that one write wakes every waiter.
func TestWaitReadManyWaiters(t *testing.T) {
	t.Parallel()
	b := newOutputBuffer(8, 8)
	const waiters = 1000
	done := make(chan waitResult, waiters)
	for range waiters {
		go func() {
			c, err := b.waitRead(t.Context(), 0)
			done <- waitResult{c, err}
		}()
	}
	waitForWaiter(t, b)
	b.Write([]byte("x"))
	for range waiters {
		r := receive(t, done)
		if want := (Chunk{Data: "x", Next: 1}); r.c != want || r.err != nil {
			t.Fatalf("waitRead = %+v, %v, want %+v, nil", r.c, r.err, want)
		}
	}
}

// TestWaitReadContextEnds checks that waitRead returns ctx.Err() when ctx
// ends, and data already there even when it has.
func TestWaitReadContextEnds(t *testing.T) {
	t.Parallel()
	b := newOutputBuffer(8, 8)
	b.Write([]byte("ab"))

	ctx, cancel := context.WithCancel(t.Context())
	done := startWaitRead(ctx, b, 2)
	waitForWaiter(t, b)
	cancel()
	r := receive(t, done)
	if want := (Chunk{Offset: 2, Next: 2}); r.c != want || !errors.Is(r.err, context.Canceled) {
		t.Errorf("waitRead after cancel = %+v, %v, want %+v, %v", r.c, r.err, want, context.Canceled)
	}

	expired, cancel2 := context.WithDeadline(t.Context(), time.Now())
	defer cancel2()
	c, err := b.waitRead(expired, 2)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waitRead with expired ctx = %+v, %v, want %v", c, err, context.DeadlineExceeded)
	}
	// Output already there is returned even though ctx has ended.
	c, err = b.waitRead(expired, 0)
	if want := (Chunk{Data: "ab", Next: 2}); c != want || err != nil {
		t.Errorf("waitRead(0) with expired ctx = %+v, %v, want %+v, nil", c, err, want)
	}
}

// TestWaitReadCloseWrite checks that closeWrite wakes a waiter with EOF and
// that later writes are ignored.
func TestWaitReadCloseWrite(t *testing.T) {
	t.Parallel()
	b := newOutputBuffer(8, 8)
	b.Write([]byte("ab"))
	done := startWaitRead(t.Context(), b, 2)
	waitForWaiter(t, b)
	b.closeWrite()
	r := receive(t, done)
	if want := (Chunk{Offset: 2, Next: 2, EOF: true}); r.c != want || r.err != nil {
		t.Errorf("waitRead after closeWrite = %+v, %v, want %+v, nil", r.c, r.err, want)
	}
	// Writes after closeWrite are ignored, so EOF stays true.
	if n, err := b.Write([]byte("late")); n != 4 || err != nil {
		t.Errorf("Write after closeWrite = %d, %v, want 4, nil", n, err)
	}
	if got := b.read(2); !got.EOF || got.Data != "" {
		t.Errorf("read(2) after a late write = %+v, want EOF and no data", got)
	}
	if got := b.total(); got != 2 {
		t.Errorf("total after a late write = %d, want 2", got)
	}
}

// TestChanged checks when the channel from changed is closed.
func TestChanged(t *testing.T) {
	t.Parallel()
	b := newOutputBuffer(8, 8)
	ch := b.changed()
	if again := b.changed(); again != ch {
		t.Error("changed returned a new channel without a write between")
	}
	b.Write(nil)
	select {
	case <-ch:
		t.Fatal("channel closed by an empty write")
	default:
	}
	b.Write([]byte("a"))
	select {
	case <-ch:
	default:
		t.Fatal("channel not closed by a write")
	}
	ch = b.changed()
	b.closeWrite()
	select {
	case <-ch:
	default:
		t.Fatal("channel not closed by closeWrite")
	}
	select {
	case <-b.changed():
	default:
		t.Fatal("changed after closeWrite returned an open channel")
	}
}

// TestWriteDoesNotAllocate is not parallel: testing.AllocsPerRun refuses to
// run beside other tests, whose allocations it would count.
func TestWriteDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name       string
		head, tail int
		size       int
	}{
		{"head and tail", 1024, 1024, 100},
		{"write larger than tail", 1024, 64, 100},
		{"tail only", 0, 1024, 100},
		{"head only", 1024, 0, 100},
		{"nothing kept", 0, 0, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newOutputBuffer(tt.head, tt.tail)
			p := bytes.Repeat([]byte("x"), tt.size)
			// Fill the head and grow the ring in full: the only
			// allocations Write makes.
			b.Write(bytes.Repeat([]byte("x"), tt.head+tt.tail+1))
			if got := testing.AllocsPerRun(100, func() { b.Write(p) }); got != 0 {
				t.Errorf("Write allocated %v times per call, want 0", got)
			}
		})
	}
}

// Limits are bounds, not allocations: a huge tail costs what is written, and
// limits beyond 1 GiB are clamped rather than passed to make (where 1<<50
// panicked with "len out of range" in the output reader).
func TestBufferLargeLimitsGrowWithOutput(t *testing.T) {
	t.Parallel()
	// 1<<50 as an int64 first, so that the test builds where int is 32
	// bits (there MaxInt stands in for it).
	huge := int(min(int64(1)<<50, int64(math.MaxInt)))
	for _, tail := range []int{1 << 30, huge, math.MaxInt} {
		b := newOutputBuffer(4, tail)
		if b.tailBytes > maxOutputLimit {
			t.Errorf("tail %d: kept limit got %d, want at most %d", tail, b.tailBytes, maxOutputLimit)
		}
		var want []byte
		for i := range 2000 { // 78,000 bytes in 39-byte writes
			line := fmt.Appendf(nil, "%038d\n", i)
			b.Write(line)
			want = append(want, line...)
		}
		if got := cap(b.ring); got > 2*len(want) {
			t.Errorf("tail %d: ring capacity got %d after %d bytes, want at most %d", tail, got, len(want), 2*len(want))
		}
		if text, trunc := b.text(0); text != string(want) || trunc != nil {
			t.Errorf("tail %d: text got %d bytes (%+v), want the %d written", tail, len(text), trunc, len(want))
		}
	}
	// A ring that grew to its limit wraps and keeps the last bytes.
	b := newOutputBuffer(4, 1000)
	var want []byte
	for i := range 2000 {
		line := fmt.Appendf(nil, "%038d\n", i)
		b.Write(line)
		want = append(want, line...)
	}
	if got := cap(b.ring); got != 1000 {
		t.Errorf("ring capacity at its limit: got %d, want 1000", got)
	}
	if text, _ := b.text(0); !strings.HasSuffix(text, " bytes omitted ...]\n"+string(want[len(want)-1000:])) {
		t.Errorf("text of a grown, wrapped ring ends %q, want the last 1000 bytes written", text[max(0, len(text)-80):])
	}
	head := newOutputBuffer(math.MaxInt, math.MaxInt)
	if head.headBytes+head.tailBytes <= 0 {
		t.Errorf("head+tail overflowed: %d + %d", head.headBytes, head.tailBytes)
	}
}

// TestIncompleteSuffixLen tells incomplete runes from invalid bytes.
func TestIncompleteSuffixLen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"a", 0},
		{"é", 0},
		{"a\xc3", 1},
		{"a\xe2\x82", 2},
		{"a\xf0\x9d\x84", 3},
		{"𝄞", 0},
		{"\xe2a", 0},        // invalid, not incomplete
		{"\xe2\x41", 0},     // invalid second byte
		{"\x80\x80\x80", 0}, // stray continuation bytes
		{"\xff", 0},
	}
	for _, tt := range tests {
		if got := incompleteSuffixLen([]byte(tt.in)); got != tt.want {
			t.Errorf("incompleteSuffixLen(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestLeadingContinuationLen checks the remains of a rune cut at its start.
func TestLeadingContinuationLen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"a", 0},
		{"\xa9a", 1},
		{"\x82\xac", 2},
		{"\x9d\x84\x9e", 3},
		{"\x80\x80\x80\x80", 3}, // no rune has more than three
		{"é", 0},
	}
	for _, tt := range tests {
		if got := leadingContinuationLen([]byte(tt.in)); got != tt.want {
			t.Errorf("leadingContinuationLen(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestCutLongLines checks line cutting on its own, without a buffer.
func TestCutLongLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		max     int
		want    string
		wantCut int
	}{
		{"abcdef", 0, "abcdef", 0},
		{"abcdef", -1, "abcdef", 0},
		{"abcdef", 6, "abcdef", 0},
		{"abcdef", 5, "abcde [... line truncated, 1 bytes]", 1},
		{"abc\n\ndefgh\n", 3, "abc\n\ndef [... line truncated, 2 bytes]\n", 1},
		{"ab€", 4, "ab [... line truncated, 3 bytes]", 1},
		{"€€\n€€", 3, "€ [... line truncated, 3 bytes]\n€ [... line truncated, 3 bytes]", 2},
	}
	for _, tt := range tests {
		got, cut := cutLongLines(tt.in, tt.max)
		if got != tt.want || cut != tt.wantCut {
			t.Errorf("cutLongLines(%q, %d) = %q, %d, want %q, %d", tt.in, tt.max, got, cut, tt.want, tt.wantCut)
		}
	}
}

// FuzzBuffer writes the fuzzer's data in pieces whose sizes it also chooses,
// checking bounded memory, exact totals, the head and tail against what was
// written, the text against the reference, and that a reader accounts for
// every byte exactly once.
func FuzzBuffer(f *testing.F) {
	f.Add(uint16(4), uint16(4), []byte{1, 2, 3}, []byte("hello, world\n"))
	f.Add(uint16(3), uint16(5), []byte{0, 1}, []byte("é€𝄞é€𝄞é€𝄞"))
	f.Add(uint16(2), uint16(3), []byte{200}, []byte("a\xffb\xe2\x82c\xf0\x9d\x84\n\x80\x80"))
	f.Add(uint16(0), uint16(7), []byte{5}, []byte(strings.Repeat("line\n", 20)))
	f.Add(uint16(9), uint16(0), []byte{}, []byte(strings.Repeat("€", 20)))
	f.Fuzz(func(t *testing.T, head, tail uint16, sizes, data []byte) {
		b := newOutputBuffer(int(head%300), int(tail%300))
		validInput := utf8.Valid(data)
		var r reader
		for i, written := 0, 0; written < len(data); i++ {
			n := 1
			if len(sizes) > 0 {
				n = 1 + int(sizes[i%len(sizes)])
			}
			n = min(n, len(data)-written)
			b.Write(data[written : written+n])
			written += n
			checkState(t, b, data[:written], false)
			r.check(t, b.read(r.next), data[:written], validInput)
		}
		b.closeWrite()
		checkState(t, b, data, true)
		for !r.eof {
			if r.chunks > 2*len(data)+10 {
				t.Fatalf("reader made no progress: %d chunks for %d bytes", r.chunks, len(data))
			}
			r.check(t, b.read(r.next), data, validInput)
		}
		if r.next != int64(len(data)) {
			t.Fatalf("EOF at %d, want %d", r.next, len(data))
		}
	})
}
