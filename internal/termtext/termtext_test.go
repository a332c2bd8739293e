package termtext_test

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentproc/agentproc/internal/termtext"
)

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"tab kept", "a\tb", "a\tb"},
		{"sgr colours", "\x1b[1;32mok\x1b[0m done", "ok done"},
		{"vite url", "  Local:   \x1b[36mhttp://localhost:\x1b[1m5173\x1b[22m/\x1b[39m\n", "  Local:   http://localhost:5173/\n"},
		{"crlf", "a\r\nb\r\n", "a\nb\n"},
		{"cr overwrite", "10%\r20%\r100%\n", "100%\n"},
		{"cr shorter keeps rest", "abcdef\rXY", "XYcdef"},
		{"cr then erase", "downloading 50%\r\x1b[2Kdone", "done"},
		{"erase to end", "abcdef\r\x1b[Kxy", "xy"},
		{"erase to start", "abcdef\x1b[3D\x1b[1K", "    ef"},
		{"backspace", "abd\bc", "abc"},
		{"backspace at start", "\b\bx", "x"},
		{"cursor column", "abcdef\x1b[3GX", "abXdef"},
		{"cursor forward clamped", "ab\x1b[100CX", "abX"},
		{"osc title bel", "\x1b]0;title\x07text", "text"},
		{"osc hyperlink st", "\x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"osc unterminated stops at newline", "\x1b]0;title\nnext", "\nnext"},
		{"dcs", "\x1bPq#0;2;0;0;0\x1b\\after", "after"},
		{"charset", "\x1b(Bx\x1b)0y", "xy"},
		{"keypad and save", "\x1b=\x1b7a\x1b8", "a"},
		{"private mode", "\x1b[?25lx\x1b[?25h", "x"},
		{"c1 csi", "a\u009b31mb", "ab"},
		{"bell and nul", "a\x07b\x00c\x7f", "abc"},
		{"controls inside long ascii", "abcdefg\x7fhijklm\x01nopqrstu\x1fvwxyz", "abcdefghijklmnopqrstuvwxyz"},
		{"invalid utf8", "a\xff\xfeb", "a\uFFFDb"},
		{"multibyte overwrite", "héllo\rHE", "HEllo"},
		{"truncated csi at end", "x\x1b[3", "x"},
		{"lone esc at end", "x\x1b", "x"},
		{"broken csi keeps text", "\x1b[12\nnext", "\nnext"},
		{"erased redraws", "x\n10%\r\x1b[2K20%\r\x1b[2K30%\r\nok", "x\n30%\nok"},
		{"overwrite after last erase", "abc\x1b[2Kdef\x1b[2Kgi\x1b[1Dh", "gh"},
		{"erase after dcs newline", "a\x1bP\n\x1b[2Kb", "b"},
		{"erase after osc newline", "a\x1b]0;t\n\x1b[2Kb", "a\nb"},
		{"erase inside osc aborts it", "a\x1b]0;t\x1b[2Kb\x07c", "bc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := termtext.Render(tt.in); got != tt.want {
				t.Errorf("Render(%q): got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRenderNoAllocWhenClean(t *testing.T) {
	s := strings.Repeat("a clean line of output, with ünïcödé\n", 100)
	allocs := testing.AllocsPerRun(100, func() {
		if termtext.Render(s) != s {
			t.Fatal("clean text changed")
		}
	})
	if allocs != 0 {
		t.Errorf("allocations: got %v, want 0", allocs)
	}
}

// TestRenderRecordedProgressBar renders the recorded output of a real
// colour progress bar (see testdata/README.md).
func TestRenderRecordedProgressBar(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/rich_progress.out")
	if err != nil {
		t.Fatal(err)
	}
	got := termtext.Render(string(raw))
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines: got %d, want 3 (status, final bar, status):\n%s", len(lines), got)
	}
	if lines[0] != "Collecting example-package==1.0" {
		t.Errorf("first line: got %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "Downloading example_package-1.0.tar.gz") || !strings.Contains(lines[1], "4.0/4.0 MB") {
		t.Errorf("bar line: got %q, want its final state (4.0/4.0 MB)", lines[1])
	}
	if lines[2] != "Successfully installed example-package-1.0" {
		t.Errorf("last line: got %q", lines[2])
	}
	if strings.ContainsAny(got, "\x1b\r") {
		t.Errorf("escape or CR left in %q", got)
	}
	if len(got)*20 > len(raw) {
		t.Errorf("rendered %d bytes from %d: want at least 20 times smaller", len(got), len(raw))
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{"", "a\r\nb", "\x1b[31mx\x1b[0m", "ab\x1b[2Dc\x1b[K", "\x1b]0;t\x07", "é\b\bx", "\xff\xc2\x9b1m", "\x1bP\x1b\\", "\x1b[9999999999C.", "a\x1b[2Kb\rc\x1b[2Kd\ne\x1b[2K", "\x1bPx\r\x1b[2Ky\n\x1b[2Kz\x1b\\w", "\x1b]0;t\x1b[2Kq\x9b2K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := termtext.Render(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Render(%q) = %q: not valid UTF-8", s, got)
		}
		// Invalid bytes become U+FFFD like in Chunk.Data, which can be
		// longer than the bytes it stands for; beyond that, rendering only
		// ever removes or overwrites.
		if limit := len(strings.ToValidUTF8(s, "\uFFFD")); len(got) > limit {
			t.Fatalf("Render(%q) = %q: %d bytes, want at most %d", s, got, len(got), limit)
		}
		// "CSI 2;0K" erases the whole line like "CSI 2K" but is not the
		// sequence Render skips ahead to, so this renders every
		// redraw: skipping must not change the result.
		if slow := termtext.Render(strings.ReplaceAll(s, "\x1b[2K", "\x1b[2;0K")); slow != got {
			t.Fatalf("Render(%q) = %q, but %q with CSI 2;0K for CSI 2K", s, got, slow)
		}
		if again := termtext.Render(got); again != got {
			t.Fatalf("Render not idempotent on %q: %q then %q", s, got, again)
		}
	})
}
