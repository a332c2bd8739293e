package main

import (
	"io"
	"os"
)

// Output a command printed goes to a person's terminal unchanged only in its
// colours. Everything else that a terminal acts on (OSC 52 writes to the
// clipboard, title changes, cursor and screen control, device queries whose
// answers arrive as typed input, a reset) is dropped: the command is not
// the person's, and its output must not be able to act for it. Text, tabs,
// newlines, carriage returns and backspaces pass, so progress redraws still
// work. Where stdout is not a terminal (a pipe, a file) the output passes
// byte for byte.

// terminalSafe returns w wrapped in a termFilter when w is a terminal, else
// w.
func terminalSafe(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return w
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return w
	}
	return &termFilter{w: w}
}

// The states of termFilter.
const (
	tfText   = iota
	tfEsc    // after ESC
	tfCSI    // in ESC [ ..., collecting parameters
	tfString // in OSC, DCS, SOS, PM or APC, until BEL or ESC \
	tfStrEsc // ESC inside such a string
	tfC2     // after 0xC2, the first byte of a C1 control in UTF-8
)

// maxCSI bounds a kept CSI sequence; a longer one is not a colour.
const maxCSI = 64

// termFilter passes text and SGR sequences (ESC [ params m) and drops every
// other control sequence and C0 or C1 control, keeping its state across
// writes, so a sequence split between two reads is still recognised.
type termFilter struct {
	w     io.Writer
	state int
	csi   []byte // the CSI sequence being collected
	out   []byte
}

func (t *termFilter) Write(p []byte) (int, error) {
	t.out = t.out[:0]
	for _, b := range p {
		t.step(b)
	}
	if len(t.out) > 0 {
		if _, err := t.w.Write(t.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (t *termFilter) step(b byte) {
	switch t.state {
	case tfEsc:
		switch b {
		case '[':
			t.state, t.csi = tfCSI, append(t.csi[:0], 0x1b, '[')
		case ']', 'P', 'X', '^', '_':
			t.state = tfString
		default:
			t.state = tfText // a two-byte sequence (ESC c resets): dropped
		}
		return
	case tfCSI:
		switch {
		case b >= 0x20 && b <= 0x3f && len(t.csi) < maxCSI:
			t.csi = append(t.csi, b)
		case b == 'm' && sgrParams(t.csi[2:]):
			t.out = append(append(t.out, t.csi...), b)
			t.state = tfText
		case b >= 0x40 && b <= 0x7e:
			t.state = tfText // another CSI: dropped
		default:
			t.state = tfText // malformed or overlong: dropped, b read as text
			t.step(b)
		}
		return
	case tfString:
		switch b {
		case 0x07:
			t.state = tfText
		case 0x1b:
			t.state = tfStrEsc
		}
		return
	case tfStrEsc:
		if b == '\\' {
			t.state = tfText
		} else if b != 0x1b {
			t.state = tfString
		}
		return
	case tfC2:
		t.state = tfText
		if b >= 0x80 && b <= 0x9f {
			return // a C1 control (U+0080 to U+009F, CSI and OSC among them)
		}
		t.out = append(t.out, 0xc2)
		t.step(b)
		return
	}
	switch {
	case b == 0x1b:
		t.state = tfEsc
	case b == 0xc2:
		t.state = tfC2
	case b == '\n' || b == '\r' || b == '\t' || b == '\b':
		t.out = append(t.out, b)
	case b < 0x20 || b == 0x7f:
		// Another C0 control (BEL, SO, SI, ...): dropped.
	default:
		t.out = append(t.out, b)
	}
}

// sgrParams reports whether p are the parameters of a colour (SGR)
// sequence: digits, ';' and ':' only.
func sgrParams(p []byte) bool {
	for _, b := range p {
		if (b < '0' || b > '9') && b != ';' && b != ':' {
			return false
		}
	}
	return true
}
