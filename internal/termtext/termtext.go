// Package termtext renders terminal output as the plain text a terminal
// would show, for agentproc.PlainText. It knows terminal escape sequences
// and nothing about processes.
package termtext

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Render returns s as a terminal would show it, as plain text: escape
// sequences removed, "\r", "\b" and the in-line cursor and erase sequences
// acted on within each line, other controls except "\t" and "\n" removed,
// and each run of invalid UTF-8 replaced by U+FFFD. agentproc.PlainText
// documents the rules in full. The result is never longer than s with its
// invalid bytes replaced. Render returns s itself, without allocating, when
// there is nothing to change. It is safe for concurrent use.
func Render(s string) string {
	if !needsPlain(s) {
		return s
	}
	var r plainRenderer
	return r.render(s)
}

// needsPlain reports whether Render would change s.
func needsPlain(s string) bool {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b < 0x20 && b != '\n' && b != '\t' || b == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r >= 0x80 && r <= 0x9f {
			return true
		}
		i += size
	}
	return false
}

// plainRenderer holds the line being rendered as UTF-8 bytes with the
// cursor as a byte offset at a rune boundary. Cursor movement counts runes
// (one cell each); text written at the end of the line, by far the common
// case, is appended in bulk without decoding it twice.
type plainRenderer struct {
	out  []byte
	line []byte
	cur  int
	// erasedUntil is the end of the part of the input in which
	// skipErased found no eraseLine to skip to.
	erasedUntil int
	// work is what is left of the render's budget for moving the cursor,
	// erasing before it and shifting the line's tail (moveBudget).
	work int
}

// moveBudget is the cursor work (runes stepped over, bytes blanked or
// shifted) a render may do per byte of its input. Each such step is
// bounded by the line, not by the sequence, so a line of 256 KiB followed
// by "\x1b[999999D\x1b[999999C" pairs cost the host a line's length per
// 20 bytes of input: 0.5 MiB of a tree's output took 48 s to render, and
// llmtool renders every result it returns (fourteenth attack review,
// TestAttackPlainTextQuadratic). Past the budget, cursor and erase
// sequences are dropped as colours are, and text is appended where it
// would have overwritten runes of another width: terminal output moves
// the cursor a few columns at a time and never comes near it.
const moveBudget = 4

const (
	esc = 0x1b
	bel = 0x07
)

func (r *plainRenderer) render(s string) string {
	// Rendered terminal output is usually far shorter than its input (a
	// redrawn progress bar keeps one state of hundreds), so the output
	// starts small and grows rather than reserving len(s).
	r.out = make([]byte, 0, min(len(s), 1024))
	// One line of a terminal is rarely wider than 256 columns; growing
	// the line from nothing took four or five allocations per call.
	r.line = make([]byte, 0, min(len(s), 256))
	r.work = moveBudget*len(s) + 4096
	for i := 0; i < len(s); {
		if j := printableEnd(s, i); j > i {
			r.write(s[i:j])
			i = j
			continue
		}
		if s[i] < utf8.RuneSelf {
			i = r.control(s, i)
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			// One U+FFFD for the whole run of invalid bytes, as
			// strings.ToValidUTF8 does (and agentproc for Chunk.Data).
			r.write(string(utf8.RuneError))
			i++
			for i < len(s) {
				c2, size2 := utf8.DecodeRuneInString(s[i:])
				if c2 != utf8.RuneError || size2 != 1 {
					break
				}
				i++
			}
		case c == 0x9b: // C1 CSI
			i = r.csi(s, i+size)
		case c == 0x9d: // C1 OSC
			i = skipString(s, i+size, true)
		case c == 0x90 || c == 0x98 || c == 0x9e || c == 0x9f: // C1 DCS, SOS, PM, APC
			i = skipString(s, i+size, false)
		default:
			i += size // other C1 controls show nothing
		}
	}
	r.flushLine()
	return string(r.out)
}

// printableEnd returns the end of the run of printable text at s[i]:
// valid UTF-8 without C0 controls, DEL or C1 controls (U+0080-U+009F).
// Validating while scanning, rather than finding the run's end and then
// calling utf8.ValidString on it, reads every byte once. (Checking eight
// ASCII bytes at a time was tried and measured slower: box-drawing bars
// mix ASCII and multi-byte runes too often for it to pay.)
func printableEnd(s string, i int) int {
	for i < len(s) {
		// The common one-, two- and three-byte forms are checked
		// inline; their first byte rules out controls, overlong forms,
		// surrogates and C1 controls, so only the continuation bytes
		// need a look.
		switch firstByte[s[i]] {
		case printableASCII:
			i++
			continue
		case stopASCII:
			return i
		case lead2:
			if i+1 < len(s) && s[i+1]&0xc0 == 0x80 {
				i += 2
				continue
			}
		case lead3:
			if i+2 < len(s) && s[i+1]&0xc0 == 0x80 && s[i+2]&0xc0 == 0x80 {
				i += 3
				continue
			}
		}
		rn, size := utf8.DecodeRuneInString(s[i:])
		if size == 1 || rn <= 0x9f {
			// Invalid (utf8.RuneError of size 1) or a C1 control: every
			// valid encoding of another rune is at least 2 bytes long.
			return i
		}
		i += size
	}
	return i
}

// Classes of firstByte.
const (
	otherByte      = iota // decoded with utf8.DecodeRuneInString
	printableASCII        // 0x20-0x7E
	stopASCII             // C0 controls and DEL
	lead2                 // 0xC3-0xDF: a two-byte rune above U+00BF
	lead3                 // 0xE1-0xEF except 0xED: a three-byte rune, no surrogate
)

// firstByte classifies the byte that starts a rune, for printableEnd.
var firstByte = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= 0x20 && c < 0x7f:
			t[c] = printableASCII
		case c < 0x80:
			t[c] = stopASCII
		case c >= 0xc3 && c <= 0xdf:
			t[c] = lead2
		case c >= 0xe1 && c <= 0xef && c != 0xed:
			t[c] = lead3
		}
	}
	return t
}()

// control handles the ASCII control byte at s[i] and returns where to go on.
func (r *plainRenderer) control(s string, i int) int {
	switch s[i] {
	case '\n':
		r.flushLine()
		r.out = append(r.out, '\n')
	case '\r':
		r.cur = 0
	case '\b':
		r.cur = r.back(r.cur, 1)
	case '\t':
		r.write("\t")
	case esc:
		return r.escape(s, i+1)
	}
	// Every other control (BEL, NUL, DEL, ...) shows nothing.
	return i + 1
}

// escape handles the sequence whose ESC was just before s[i].
func (r *plainRenderer) escape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return r.csi(s, i+1)
	case ']':
		return skipString(s, i+1, true)
	case 'P', 'X', '^', '_':
		return skipString(s, i+1, false)
	}
	// nF sequences: intermediates 0x20-0x2F, then one final byte
	// (ESC ( B selects a character set); plain Fp/Fe/Fs sequences have no
	// intermediates (ESC 7, ESC M, ESC c).
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// csi handles a control sequence whose introducer ended just before s[i]:
// parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, one final byte
// 0x40-0x7E. A byte outside those ranges ends a malformed sequence without
// being consumed, so text after a broken sequence is not lost.
func (r *plainRenderer) csi(s string, i int) int {
	start := i
	for i < len(s) && s[i] >= 0x30 && s[i] <= 0x3f {
		i++
	}
	params := s[start:i]
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i >= len(s) || s[i] < 0x40 || s[i] > 0x7e {
		return i
	}
	final := s[i]
	if i > start+len(params) {
		return i + 1 // intermediates: not a sequence acted on here
	}
	switch final {
	case 'K', 'C', 'D', 'G':
	default:
		// Colours (SGR, "m") and the rest are dropped without parsing
		// their parameters.
		return i + 1
	}
	if r.work <= 0 {
		return i + 1 // the budget is spent: dropped (moveBudget)
	}
	n := firstParam(params)
	switch final {
	case 'K': // erase in line
		switch n {
		case 0:
			r.line = r.line[:r.cur]
		case 1:
			// Blank every cell up to and including the cursor's: one
			// space per rune, so the line never grows.
			end := r.forward(r.cur, 1)
			r.work -= end
			at := utf8.RuneCount(r.line[:r.cur])
			r.line = slices.Replace(r.line, 0, end, []byte(strings.Repeat(" ", utf8.RuneCount(r.line[:end])))...)
			r.cur = at // every cell before it is one byte now
		case 2:
			r.line = r.line[:0]
			r.cur = 0
			return r.skipErased(s, i+1)
		}
	case 'C': // cursor forward, never past the text on the line
		r.cur = r.forward(r.cur, max(n, 1))
	case 'D': // cursor back
		r.cur = r.back(r.cur, max(n, 1))
	case 'G': // cursor to column n (1-based)
		r.cur = r.forward(0, max(n, 1)-1)
	}
	return i + 1
}

// eraseLine is the erase-in-line sequence that progress bars such as rich
// (and pip, which vendors it) send before each redraw.
const eraseLine = "\x1b[2K"

// skipErased returns where to go on after a sequence that erased the whole
// line, ending just before s[i]: at the last eraseLine before the next
// newline byte, when there is one, since everything drawn before it is
// erased again. A bar redrawn a thousand times on one line is then
// rendered once instead of a thousand times.
//
// The skip is exact because the skipped bytes hold no newline, the only
// thing that moves text from the line to the output, and because the ESC
// of eraseLine always starts a sequence however the bytes before it
// parse: no sequence or string consumes an ESC except as the ST "ESC \\".
func (r *plainRenderer) skipErased(s string, i int) int {
	if i < r.erasedUntil {
		return i // searched before: no eraseLine left before the newline
	}
	end := len(s)
	if nl := strings.IndexByte(s[i:], '\n'); nl >= 0 {
		end = i + nl
	}
	r.erasedUntil = end
	for k := end; k > i; {
		p := strings.LastIndexByte(s[i:k], esc)
		if p < 0 {
			break
		}
		if strings.HasPrefix(s[i+p:end], eraseLine) {
			return i + p
		}
		k = i + p
	}
	return i
}

// firstParam returns the first numeric parameter of a CSI sequence, 0 when
// it is absent or not a plain number. It saturates instead of overflowing.
func firstParam(params string) int {
	n := 0
	for i := 0; i < len(params); i++ {
		c := params[i]
		if c == ';' {
			break
		}
		if c < '0' || c > '9' {
			return 0
		}
		n = min(n*10+int(c-'0'), 1<<20)
	}
	return n
}

// skipString skips a string sequence (OSC, DCS, SOS, PM, APC) starting at
// s[i], up to and including its terminator: ST (ESC \ or C1 0x9C) or BEL.
// An OSC also ends before a newline: an unterminated title must not swallow
// the rest of the output. Returns the index after the sequence.
func skipString(s string, i int, osc bool) int {
	for i < len(s) {
		switch s[i] {
		case bel:
			return i + 1
		case esc:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			// ESC followed by anything else aborts the string; the new
			// sequence is handled by the caller.
			return i
		case '\n':
			if osc {
				return i
			}
		case 0xc2:
			if i+1 < len(s) && s[i+1] == 0x9c {
				return i + 2
			}
		}
		i++
	}
	return i
}

// write puts text (valid UTF-8, no controls) at the cursor, overwriting one
// cell per rune.
func (r *plainRenderer) write(text string) {
	if r.cur == len(r.line) {
		r.line = append(r.line, text...)
		r.cur = len(r.line)
		return
	}
	for len(text) > 0 {
		if r.cur == len(r.line) {
			r.line = append(r.line, text...)
			r.cur = len(r.line)
			return
		}
		_, newSize := utf8.DecodeRuneInString(text)
		_, oldSize := utf8.DecodeRune(r.line[r.cur:])
		if newSize != oldSize {
			// The tail shifts: charged, and past the budget the
			// rest is appended instead (moveBudget).
			if r.work -= len(r.line) - r.cur; r.work <= 0 {
				r.cur = len(r.line)
				continue
			}
		}
		r.line = slices.Replace(r.line, r.cur, r.cur+oldSize, []byte(text[:newSize])...)
		r.cur += newSize
		text = text[newSize:]
	}
}

// forward returns the offset n runes after off, at most len(line).
func (r *plainRenderer) forward(off, n int) int {
	for ; n > 0 && off < len(r.line); n-- {
		_, size := utf8.DecodeRune(r.line[off:])
		off += size
		r.work--
	}
	return off
}

// back returns the offset n runes before off, at least 0.
func (r *plainRenderer) back(off, n int) int {
	for ; n > 0 && off > 0; n-- {
		_, size := utf8.DecodeLastRune(r.line[:off])
		off -= size
		r.work--
	}
	return off
}

// flushLine appends the current line to the output and starts a new one.
func (r *plainRenderer) flushLine() {
	r.out = append(r.out, r.line...)
	r.line = r.line[:0]
	r.cur = 0
}
