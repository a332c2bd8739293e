package agentproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
	"github.com/agentproc/agentproc/llmtool"
)

// Tests of the fourteenth attack review (unprivileged and the surfaces):
// docs/sandbox-threats.md, "Fourteenth attack review (unprivileged and
// the surfaces)".

// costlyPattern returns an alternation of n branches, each a different
// character class and "x", so that the parser can neither merge nor
// factor them: every branch's thread stays alive at every byte of a line
// of "a"s, and the match costs the line's length times n.
func costlyPattern(n int) string {
	var b strings.Builder
	b.WriteString("(?:")
	for i := range n {
		if i > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, `[^\x{%x}]x`, 0x4e00+i)
	}
	b.WriteByte(')')
	return b.String()
}

// longLineThenMatch prints a line of n "a"s, then "zx" (which the costly
// pattern matches), then stays alive, as a server does.
func longLineThenMatch(n int) string {
	return fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; echo; echo zx; exec sleep 60", n)
}

// TestAttackPatternCostsHostCPU: WaitMatch's pattern is often a model's
// (llmtool's process_wait and process_output, `agentproc mcp`) or an HTTP
// client's (httpapi's wait_for), matched by the host against a tree's
// output. Go's regexp is linear in the text, but times the pattern's
// program: a 260 KB alternation of 20,000 branches (which regexp takes)
// made each KiB of a line cost the host about 1.6 s of CPU, in one
// MatchString that no ctx interrupts, so the tool call's "at most 30
// seconds" did not hold and a tree's 1 MiB line held a host CPU for half
// an hour. The control: the pattern matches the short line, and one
// match of 256 bytes of the long line costs what the review measured.
func TestAttackPatternCostsHostCPU(t *testing.T) {
	t.Parallel()
	// 2,000 branches (26 KB, 6,000 instructions) and a 16 KiB line keep
	// the test short: the line costs about 3 s unbounded without -race
	// (0.2 ms a byte), minutes with it.
	re := regexp.MustCompile(costlyPattern(2000))
	start := time.Now()
	if re.MatchString(strings.Repeat("a", 256)) {
		t.Fatal("control: the pattern matched a line of a's, want no match")
	}
	if cost := time.Since(start); cost < 10*time.Millisecond {
		t.Fatalf("control: matching 256 bytes took %v, want the review's cost (about 50 ms)", cost)
	}
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: longLineThenMatch(16 << 10)})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start = time.Now()
	line, err := p.WaitMatch(ctx, re)
	if took := time.Since(start); err != nil || line != "zx" || took > 2*time.Second {
		t.Fatalf("WaitMatch past a 16 KiB line: got %q, %v after %v, want \"zx\" within 2 s (the long line not matched)", line, err, took)
	}
}

// TestAttackPatternCostsHostCPUThroughTool is the same attack through
// llmtool's process_wait, the model's own call: the pattern is refused at
// once with a message that says why, where it held the host for seconds a
// KiB (and promptMatch would have matched the unfinished line as well).
// The control: a usual pattern finds the line through the same call.
func TestAttackPatternCostsHostCPUThroughTool(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	tb := llmtool.New(m.Scope("model"), llmtool.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := tb.Dispatch(ctx, "execute", json.RawMessage(fmt.Sprintf(`{"command": %q, "run_in_background": true}`, longLineThenMatch(4096))), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(out)
	if id == "" {
		t.Fatalf("no process ID in %q", out)
	}
	wait := func(pattern string) (string, time.Duration, error) {
		args, _ := json.Marshal(map[string]any{"process_id": id, "pattern": pattern, "timeout": 5})
		start := time.Now()
		out, err := tb.Dispatch(ctx, "process_wait", args, nil)
		return out, time.Since(start), err
	}
	if out, _, err := wait(`^z+x$`); err != nil || !strings.Contains(out, "zx") {
		t.Fatalf("control: process_wait for ^z+x$: got %v (%q), want the line found", err, out)
	}
	out, took, err := wait(costlyPattern(2000))
	if err == nil || !strings.Contains(err.Error(), "too large") || took > 2*time.Second {
		t.Fatalf("process_wait with a 26 KB pattern: got %v (%.200q) after %v, want it refused as too large at once", err, out, took)
	}
}

// TestAttackPatternCostsHostCPUThroughHTTP is the same attack through
// httpapi's wait_for, an HTTP client's: refused with a 400 that says why.
// WaitMatch's own bound would end the wait within a few seconds of its
// timeout, but each such wait held a host CPU all the while. The control:
// a usual pattern finds the line through the same route.
func TestAttackPatternCostsHostCPUThroughHTTP(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: longLineThenMatch(4096)})
	h := httpapi.NewHandler(m)
	get := func(pattern string) (*httptest.ResponseRecorder, time.Duration) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/"+p.ID()+"/output?timeout=5s&wait_for="+url.QueryEscape(pattern), nil)
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, r)
		return w, time.Since(start)
	}
	if w, _ := get(`^z+x$`); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"match":"zx"`) {
		t.Fatalf("control: wait_for=^z+x$: got %d %.300s, want the line matched", w.Code, w.Body.String())
	}
	w, took := get(costlyPattern(2000))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "too large") || took > 2*time.Second {
		t.Fatalf("wait_for with a 26 KB pattern: got %d %.200s after %v, want 400 \"too large\" at once", w.Code, w.Body.String(), took)
	}
}

// TestAttackReadyMatchCostsHostCPU: Request.Ready.Match (httpapi's
// ready.match, a client's) is matched by the host against every line of
// the process's output for its whole life, with no wait's limit: the
// pattern attack of TestAttackPatternCostsHostCPU held a host CPU for as
// long as the tree printed, and Manager.Close waited for the match in
// progress. Start refuses such a pattern now, as the surfaces do. The
// control: a usual ready pattern makes the process ready.
func TestAttackReadyMatchCostsHostCPU(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	events := m.Subscribe(ctx)
	p := mustStart(t, m, agentproc.Request{Command: "echo server up; exec sleep 60", Ready: &agentproc.ReadyCheck{Match: `^server up$`}})
	for e := range events {
		if e.Type == agentproc.EventReady && e.ID == p.ID() {
			break
		}
	}
	if !p.Info().Ready {
		t.Fatalf("control: a usual ready pattern: got %+v, want the process ready", p.Info())
	}
	q, err := m.Start(ctx, agentproc.Request{Command: longLineThenMatch(4096), Ready: &agentproc.ReadyCheck{Match: costlyPattern(2000)}})
	if err == nil {
		_, _ = q.Stop(ctx)
	}
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(fmt.Sprint(err), "too large") {
		t.Fatalf("Start with a 26 KB ready pattern: got %v, want ErrInvalidRequest saying it is too large", err)
	}
}

// TestAttackPlainTextQuadratic: PlainText renders a tree's output for the
// host (llmtool renders every result it returns, WaitMatch's Plain lines,
// the ready check's, httpapi's plain=true), and a cursor move or an erase
// cost up to the line's length however short its sequence: a line of
// 256 KiB followed by "\x1b[999999D\x1b[999999C" pairs, "\x1b[1K"s, or,
// after a "\r", runes of another width than those they overwrite, made
// 0.5 MiB of a tree's output cost the host 48 s to render, with no limit
// of the tree's to count it. The control: each sequence acts on a short
// line as a terminal does.
func TestAttackPlainTextQuadratic(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"abc\x1b[2Dx":                  "axc",
		"abc\x1b[1K":                   "   ",
		"abc\ré":                       "ébc",
		"abcd\x1b[3D\x1b[1Cx\x1b[99C!": "abxd!",
	} {
		if got := agentproc.PlainText(in); got != want {
			t.Errorf("control: PlainText(%q): got %q, want %q", in, got, want)
		}
	}
	line := strings.Repeat("a", 256<<10)
	for name, in := range map[string]string{
		"cursor moves":    line + strings.Repeat("\x1b[999999D\x1b[999999C", 4000),
		"erase before":    line + strings.Repeat("\x1b[1K", 16000),
		"wider overwrite": line + "\r" + strings.Repeat("é", 64<<10),
	} {
		start := time.Now()
		out := agentproc.PlainText(in)
		if took := time.Since(start); took > time.Second || len(out) < len(line) {
			t.Errorf("%s: PlainText of %d KiB took %v (%d bytes out), want under 1 s and the line kept", name, len(in)>>10, took, len(out))
		}
	}
}
