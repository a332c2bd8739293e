//go:build unix

package agentproc_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestOutputPlain checks Output(Plain) on a real process: colours and
// carriage-return redraws are rendered away while Truncation still counts
// the raw bytes.
func TestOutputPlain(t *testing.T) {
	t.Parallel()
	m := newManager(t, agentproc.WithOutputLimits(64, 64, 0))
	// 100 redraws of a progress line push the raw output past the 128
	// retained bytes.
	p := mustStart(t, m, agentproc.Request{Command: `printf '\033[1;32mCollecting\033[0m pkg\n'; i=0; while [ $i -lt 100 ]; do printf '\r\033[2K%3d%%' $i; i=$((i+1)); done; printf '\r\033[2Kdone\n'`})
	mustWait(t, p)
	raw := p.Output()
	plain := p.Output(agentproc.Plain)
	// The 64-byte head ends inside the redraws, so it shows the state it
	// kept ("  3%"); the tail shows the last one ("done").
	if plain.Text != "Collecting pkg\n  3%\n[... "+strconv.FormatInt(raw.Truncated.OmittedBytes, 10)+" bytes omitted ...]\ndone\n" {
		t.Errorf("plain text: got %q (raw %q)", plain.Text, raw.Text)
	}
	if *plain.Truncated != *raw.Truncated {
		t.Errorf("truncation: got %+v, want the raw one %+v", *plain.Truncated, *raw.Truncated)
	}
	if raw.Truncated.OriginalBytes <= 128 {
		t.Errorf("original bytes: got %d, want > 128", raw.Truncated.OriginalBytes)
	}
}

// TestWaitMatchPlain matches a URL printed the way Vite prints it, with
// colour codes in the middle of it, which a plain pattern misses on the
// raw line.
func TestWaitMatchPlain(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: `printf '  \033[32m➜\033[39m  \033[1mLocal\033[22m:   \033[36mhttp://localhost:\033[1m5173\033[22m/\033[39m\r\n'`})
	re := regexp.MustCompile(`Local:\s+(http://localhost:\d+/)`)
	line, err := p.WaitMatch(testContext(t), re, agentproc.Plain)
	if err != nil {
		t.Fatalf("WaitMatch(Plain): %v", err)
	}
	if want := "  ➜  Local:   http://localhost:5173/"; line != want {
		t.Errorf("line: got %q, want %q", line, want)
	}
	if _, err := p.WaitMatch(testContext(t), re); err == nil {
		t.Errorf("WaitMatch on raw lines matched; want ErrExited (the colour codes split the URL)")
	}
}
