package httpapi

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentproc/agentproc"
)

// The page's colours: a line of output that only writes text and sets
// colours and attributes (SGR, "ESC [ ... m") is sent as styled spans, the
// way a terminal shows it. Every span's text is rendered by
// agentproc.PlainText, so no other escape sequence or control reaches the
// page, and the page sets it as text, never as markup; colours are sent as
// "#rrggbb" only. A line that redraws itself ("\r", "\b", cursor and erase
// sequences) is rendered plain, without colours, as before: styling what a
// terminal overwrote is left out rather than guessed.

// uiSpan is a run of text in one style. Empty fields are the page's
// default.
type uiSpan struct {
	Text      string `json:"text"`
	FG        string `json:"fg,omitempty"`
	BG        string `json:"bg,omitempty"`
	Bold      bool   `json:"bold,omitempty"`
	Dim       bool   `json:"dim,omitempty"`
	Italic    bool   `json:"italic,omitempty"`
	Underline bool   `json:"underline,omitempty"`
}

// sgrStyle is the state SGR sequences change.
type sgrStyle struct {
	fg, bg                       string
	bold, dim, italic, underline bool
}

// uiRender renders raw output as the page shows it: the plain text
// (agentproc.PlainText, line by line) and, when any of it is styled, the
// spans whose texts concatenate to it (nil otherwise). The style carries
// from line to line, as in a terminal; it starts from the default at each
// call, as the page starts each block afresh.
func uiRender(raw string) (string, []uiSpan) {
	var spans []uiSpan
	styled := false
	var st sgrStyle
	add := func(text string) {
		if text == "" {
			return
		}
		sp := uiSpan{Text: text, FG: st.fg, BG: st.bg, Bold: st.bold, Dim: st.dim, Italic: st.italic, Underline: st.underline}
		if n := len(spans); n > 0 && sameStyle(spans[n-1], sp) {
			spans[n-1].Text += text
			return
		}
		styled = styled || sp != uiSpan{Text: text}
		spans = append(spans, sp)
	}
	for line := range strings.SplitAfterSeq(raw, "\n") {
		body, nl := strings.CutSuffix(line, "\n")
		if redraws(body) {
			add(agentproc.PlainText(body))
		} else {
			for body != "" {
				i := strings.Index(body, "\x1b[")
				if i < 0 {
					add(agentproc.PlainText(body))
					break
				}
				end, params, ok := sgrAt(body, i)
				add(agentproc.PlainText(body[:i]))
				if ok {
					st.apply(params)
				} else {
					// Another sequence: PlainText drops it.
					add(agentproc.PlainText(body[i:end]))
				}
				body = body[end:]
			}
		}
		if nl {
			add("\n")
		}
	}
	var sb strings.Builder
	for _, sp := range spans {
		sb.WriteString(sp.Text)
	}
	if !styled {
		return sb.String(), nil
	}
	return sb.String(), spans
}

func sameStyle(a, b uiSpan) bool {
	a.Text, b.Text = "", ""
	return a == b
}

// redraws reports whether a line moves its cursor back or erases: a
// carriage return other than a final one (CRLF), a backspace, or a CSI
// sequence PlainText acts on (erase in line, cursor left, right, to a
// column).
func redraws(line string) bool {
	line = strings.TrimSuffix(line, "\r")
	if strings.ContainsAny(line, "\r\b") {
		return true
	}
	for i := 0; ; {
		j := strings.Index(line[i:], "\x1b[")
		if j < 0 {
			return false
		}
		end, _, ok := sgrAt(line, i+j)
		if !ok && end > i+j+2 && strings.IndexByte("KCDG", line[end-1]) >= 0 {
			return true
		}
		i = max(end, i+j+2)
	}
}

// sgrAt parses the CSI sequence at s[i] ("ESC ["): its end, its
// parameters, and whether it is an SGR ("m" with only digits, ";" and
// ":"). A sequence cut off at the end of s ends there.
func sgrAt(s string, i int) (end int, params string, ok bool) {
	j := i + 2
	for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f {
		j++
	}
	params = s[i+2 : j]
	for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
		j++
	}
	if j >= len(s) || s[j] < 0x40 || s[j] > 0x7e {
		return j, "", false
	}
	return j + 1, params, s[j] == 'm' && j == i+2+len(params) && strings.Trim(params, "0123456789;:") == ""
}

// apply changes the style by one SGR's parameters.
func (st *sgrStyle) apply(params string) {
	ps := strings.Split(params, ";")
	for k := 0; k < len(ps); k++ {
		p := ps[k]
		if sub := strings.Split(p, ":"); len(sub) > 1 {
			// ISO 8613-6 form: 38:5:N, 38:2::R:G:B or 38:2:R:G:B.
			if n, _ := strconv.Atoi(sub[0]); n == 38 || n == 48 {
				st.extended(n, sub[1:])
			}
			continue
		}
		n, _ := strconv.Atoi(p) // "" is 0, a reset
		switch {
		case n == 0:
			*st = sgrStyle{}
		case n == 1:
			st.bold = true
		case n == 2:
			st.dim = true
		case n == 3:
			st.italic = true
		case n == 4:
			st.underline = true
		case n == 22:
			st.bold, st.dim = false, false
		case n == 23:
			st.italic = false
		case n == 24:
			st.underline = false
		case n >= 30 && n <= 37:
			st.fg = palette(n - 30)
		case n == 39:
			st.fg = ""
		case n >= 40 && n <= 47:
			st.bg = palette(n - 40)
		case n == 49:
			st.bg = ""
		case n >= 90 && n <= 97:
			st.fg = palette(n - 90 + 8)
		case n >= 100 && n <= 107:
			st.bg = palette(n - 100 + 8)
		case n == 38 || n == 48:
			k += st.extended(n, ps[k+1:])
		}
	}
}

// extended applies 38 (foreground) or 48 (background) with the arguments
// that follow it, and returns how many it used.
func (st *sgrStyle) extended(which int, args []string) int {
	var colour string
	used := 0
	switch {
	case len(args) >= 2 && args[0] == "5":
		colour, used = palette(numOf(args, 1)), 2
	case len(args) >= 4 && args[0] == "2":
		rgb := args[1:]
		used = 4
		if len(args) >= 5 && args[1] == "" {
			rgb, used = args[2:], 5 // the colour-space ID left empty
		}
		colour = fmt.Sprintf("#%02x%02x%02x", numOf(rgb, 0), numOf(rgb, 1), numOf(rgb, 2))
	default:
		return len(args)
	}
	if which == 38 {
		st.fg = colour
	} else {
		st.bg = colour
	}
	return used
}

// numOf is args[i] as a colour component, 0 to 255; missing is 0.
func numOf(args []string, i int) int {
	if i >= len(args) {
		return 0
	}
	n, _ := strconv.Atoi(args[i])
	return min(max(n, 0), 255)
}

// palette is xterm's 256-colour palette as "#rrggbb": the 16 system
// colours, the 6×6×6 cube, the 24 greys.
func palette(n int) string {
	system := [16]string{
		"#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
		"#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff",
	}
	switch {
	case n < 16:
		return system[max(n, 0)]
	case n < 232:
		n -= 16
		level := func(v int) int {
			if v == 0 {
				return 0
			}
			return 55 + 40*v
		}
		return fmt.Sprintf("#%02x%02x%02x", level(n/36), level(n/6%6), level(n%6))
	}
	g := 8 + 10*(min(n, 255)-232)
	return fmt.Sprintf("#%02x%02x%02x", g, g, g)
}
