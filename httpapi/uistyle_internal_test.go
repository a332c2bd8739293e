package httpapi

import (
	"reflect"
	"strings"
	"testing"
)

// TestUIRenderColours: SGR becomes styled spans (the 16 colours, 256 and
// true colour in both forms, attributes, resets); every other escape and
// control is dropped from the span texts, and a line that redraws itself
// is plain.
func TestUIRenderColours(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		raw   string
		text  string
		spans []uiSpan
	}{
		{"plain", "hello\n", "hello\n", nil},
		{"red then reset", "\x1b[31mFAIL\x1b[0m ok\n", "FAIL ok\n", []uiSpan{
			{Text: "FAIL", FG: "#cd0000"}, {Text: " ok\n"}}},
		{"bold bright green on blue", "\x1b[1;92;44mPASS\x1b[m\n", "PASS\n", []uiSpan{
			{Text: "PASS", FG: "#00ff00", BG: "#0000ee", Bold: true}, {Text: "\n"}}},
		{"256 and true colour", "\x1b[38;5;196ma\x1b[48;2;1;2;3mb\x1b[38:2::10:20:30mc\x1b[39;49md\n", "abcd\n", []uiSpan{
			{Text: "a", FG: "#ff0000"}, {Text: "b", FG: "#ff0000", BG: "#010203"}, {Text: "c", FG: "#0a141e", BG: "#010203"}, {Text: "d\n"}}},
		{"style carries over lines", "\x1b[3mone\ntwo\x1b[23m\n", "one\ntwo\n", []uiSpan{
			{Text: "one\ntwo", Italic: true}, {Text: "\n"}}},
		{"other escapes dropped", "\x1b]52;c;aGk=\x07\x1b[32mok\x1b]0;title\x07\x1b[2J\x1b[0m\n", "ok\n", []uiSpan{
			{Text: "ok", FG: "#00cd00"}, {Text: "\n"}}},
		{"redrawn line is plain", "\x1b[32m10%\r\x1b[2K\x1b[32m100%\x1b[0m\n", "100%\n", nil},
		{"CRLF keeps colours", "\x1b[33mwarn\x1b[0m\r\n", "warn\n", []uiSpan{
			{Text: "warn", FG: "#cdcd00"}, {Text: "\n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, spans := uiRender(tt.raw)
			if text != tt.text {
				t.Errorf("text: got %q, want %q", text, tt.text)
			}
			if !reflect.DeepEqual(spans, tt.spans) {
				t.Errorf("spans: got %+v, want %+v", spans, tt.spans)
			}
			for _, sp := range spans {
				if strings.ContainsAny(sp.Text, "\x1b\x07\r\b") {
					t.Errorf("span %q: a control reached the page", sp.Text)
				}
			}
		})
	}
}
