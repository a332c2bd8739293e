package agentproc_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestPlainText checks that PlainText is Render of internal/termtext, whose
// tests hold the full table, the recorded progress bar and the fuzz target:
// one case of each kind of change, and clean text returned as it is.
func TestPlainText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"sgr colours", "\x1b[1;32mok\x1b[0m done", "ok done"},
		{"cr overwrite", "10%\r20%\r100%\n", "100%\n"},
		{"erased redraws", "x\n10%\r\x1b[2K20%\r\x1b[2K30%\r\nok", "x\n30%\nok"},
		{"osc title bel", "\x1b]0;title\x07text", "text"},
		{"c1 csi", "a\u009b31mb", "ab"},
		{"bell and nul", "a\x07b\x00c\x7f", "abc"},
		{"invalid utf8", "a\xff\xfeb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := agentproc.PlainText(tt.in); got != tt.want {
				t.Errorf("PlainText(%q): got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestPlainTextNoAllocWhenClean(t *testing.T) {
	s := strings.Repeat("a clean line of output, with ünïcödé\n", 100)
	allocs := testing.AllocsPerRun(100, func() {
		if agentproc.PlainText(s) != s {
			t.Fatal("clean text changed")
		}
	})
	if allocs != 0 {
		t.Errorf("allocations: got %v, want 0", allocs)
	}
}

// BenchmarkPlainText renders 32 KiB of the recorded progress bar output
// (the size of a default head plus tail). The baseline is what peers do: a
// regular expression that deletes escape sequences, which leaves every
// redraw of the bar in the text.
func BenchmarkPlainText(b *testing.B) {
	raw, err := os.ReadFile("internal/termtext/testdata/rich_progress.out")
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw[:16<<10]) + string(raw[len(raw)-16<<10:])
	b.Run("agentproc", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		b.ReportAllocs()
		reportThreadCPU(b, func() {
			for b.Loop() {
				_ = agentproc.PlainText(s)
			}
		})
	})
	// The same redraws with "CSI K" (erase to the end, from column 0
	// after the "\r") instead of "CSI 2K": the same text, but rendered
	// redraw by redraw, since only "CSI 2K" lets PlainText skip to the
	// last redraw of a line.
	noSkip := strings.ReplaceAll(s, "\x1b[2K", "\x1b[0K")
	b.Run("agentproc_erase_to_end", func(b *testing.B) {
		if agentproc.PlainText(noSkip) != agentproc.PlainText(s) {
			b.Fatal("CSI K and CSI 2K after \\r render differently")
		}
		b.SetBytes(int64(len(noSkip)))
		b.ReportAllocs()
		reportThreadCPU(b, func() {
			for b.Loop() {
				_ = agentproc.PlainText(noSkip)
			}
		})
	})
	ansi := regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07`)
	b.Run("regexp_strip", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		b.ReportAllocs()
		reportThreadCPU(b, func() {
			for b.Loop() {
				_ = ansi.ReplaceAllString(s, "")
			}
		})
	})
}
