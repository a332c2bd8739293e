//go:build unix

package httpapi_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// The tests of GET /{id}/output (output.go): offsets and wait_for.

func TestOutputFromOffset(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, []agentproc.Option{agentproc.WithOutputLimits(10, 10, 0)}, nil)
	ctx := testContext(t)
	c := s.client()
	id := start(t, c, httpapi.StartRequest{Command: "echo 0123456789; echo abcdefghij; echo ABCDEFGHIJ"})
	if _, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}

	// 33 bytes written; the first 10 and the last 10 kept.
	var got []httpapi.Output
	for off := int64(0); ; {
		out, err := c.Output(ctx, id, httpapi.OutputOptions{Offset: &off})
		if err != nil {
			t.Fatal(err)
		}
		if out.Position == nil || out.Truncated != nil {
			t.Fatalf("read from %d: got %+v, want a chunk", off, out)
		}
		got = append(got, out)
		if out.EOF || len(got) > 3 {
			break
		}
		off = out.Next
	}
	want := []httpapi.Output{
		{Output: "0123456789", Position: &httpapi.Position{Offset: 0, Next: 10}},
		{Output: "BCDEFGHIJ\n", Position: &httpapi.Position{Offset: 23, Next: 33, Omitted: 13, EOF: true}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d reads, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Output != want[i].Output || *got[i].Position != *want[i].Position || got[i].Running || *got[i].ExitCode != 0 {
			t.Errorf("read %d: got %q %+v, want %q %+v", i, got[i].Output, *got[i].Position, want[i].Output, *want[i].Position)
		}
	}

	// Raw: the chunk's fields, and output as its data.
	r := s.raw(t, "GET", "/"+id+"/output?offset=33", "")
	if got, want := keys(r.object(t)), []string{"eof", "exit_code", "next", "offset", "omitted", "output", "reason", "running"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if obj := r.object(t); obj["output"] != "" || obj["next"] != float64(33) || obj["eof"] != true {
		t.Errorf("read at the end: got %s, want no data, next 33, eof", r.body)
	}
	// Past the end: no data, Next is the offset.
	r = s.raw(t, "GET", "/"+id+"/output?offset=1000", "")
	if obj := r.object(t); obj["output"] != "" || obj["next"] != float64(1000) || obj["offset"] != float64(1000) {
		t.Errorf("read past the end: got %s, want next 1000", r.body)
	}
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()

	id := start(t, c, httpapi.StartRequest{Command: "echo starting; echo 'ready on :8080'; " + forever, Background: true})
	zero := int64(0)
	out, err := c.Output(ctx, id, httpapi.OutputOptions{WaitFor: regexp.MustCompile(`ready on :\d+`), Offset: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if out.Match != "ready on :8080" || !out.Running || out.TimedOut || !strings.HasPrefix(out.Output, "starting\n") {
		t.Fatalf("got %+v, want the ready line matched and the output from 0", out)
	}
	r := s.raw(t, "GET", "/"+id+"/output?wait_for=ready", "")
	if obj := r.object(t); obj["match"] != "ready on :8080" || obj["running"] != true {
		t.Fatalf("raw wait_for: got %s", r.body)
	}

	// A process that exits without the line: not running, no match, not
	// a timeout.
	id = start(t, c, httpapi.StartRequest{Command: "echo done"})
	out, err = c.Output(ctx, id, httpapi.OutputOptions{WaitFor: regexp.MustCompile("ready")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Match != "" || out.Running || out.TimedOut || out.Output != "done\n" {
		t.Fatalf("got %+v, want the exited process without a match", out)
	}
}

func TestWaitForTimeout(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	s := newTestServer(t, nil, nil, httpapi.WithClock(clk))
	ctx := testContext(t)
	c := s.client()
	id := start(t, c, httpapi.StartRequest{Command: forever})

	trap := clk.Trap().AfterFunc("httpapi", "wait")
	defer trap.Close()
	got := make(chan httpapi.Output, 1)
	go func() {
		out, err := c.Output(ctx, id, httpapi.OutputOptions{WaitFor: regexp.MustCompile("ready"), Timeout: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- out
	}()
	call := trap.MustWait(ctx)
	if call.Duration != 5*time.Second {
		t.Errorf("wait bounded by %s, want 5s", call.Duration)
	}
	call.MustRelease(ctx)
	clk.Advance(5 * time.Second).MustWait(ctx)
	select {
	case out := <-got:
		if !out.TimedOut || !out.Running || out.Match != "" {
			t.Fatalf("got %+v, want a running process and timed_out", out)
		}
	case <-ctx.Done():
		t.Fatal("the wait did not end when its timeout passed")
	}
}

// TestOutputFollow reads a process that prints one line at a time with
// ?follow: each read blocks until there is something after its offset, and
// the reads together are the whole output.
func TestOutputFollow(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	ctx := testContext(t)
	c := s.client()
	id := start(t, c, httpapi.StartRequest{Command: "for i in 1 2 3; do echo line $i; sleep 0.1; done"})
	var sb strings.Builder
	reads := 0
	for off := int64(0); ; reads++ {
		out, err := c.Output(ctx, id, httpapi.OutputOptions{Offset: &off, Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		if out.Output == "" && !out.EOF {
			t.Fatalf("read %d from %d: got %+v, want output or EOF", reads, off, out)
		}
		sb.WriteString(out.Output)
		if out.EOF {
			break
		}
		off = out.Next
	}
	if got, want := sb.String(), "line 1\nline 2\nline 3\n"; got != want || reads < 2 {
		t.Errorf("got %q in %d reads, want %q in several", got, reads, want)
	}
	r := s.raw(t, "GET", "/"+id+"/output?follow=true", "")
	if r.status != 400 {
		t.Errorf("follow without offset: got status %d, want 400", r.status)
	}
}

// TestOutputSince: ?since= reads the output written at or after a time of
// the Manager's clock, alone or with offset (the later wins), and a bad
// time is a 400.
func TestOutputSince(t *testing.T) {
	t.Parallel()
	clk := quartz.NewMock(t)
	s := newTestServer(t, []agentproc.Option{agentproc.WithClock(clk)}, nil)
	ctx := testContext(t)
	c := s.client()
	id := start(t, c, httpapi.StartRequest{Command: "echo before; read x; echo after", Stdin: true})
	if _, err := c.Output(ctx, id, httpapi.OutputOptions{WaitFor: regexp.MustCompile(`^before$`)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	split := clk.Now()
	clk.Advance(10 * time.Second)
	if _, err := c.WriteStdin(ctx, id, httpapi.StdinRequest{Data: "\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Output(ctx, id, httpapi.OutputOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Output(ctx, id, httpapi.OutputOptions{Since: split})
	if err != nil || out.Output != "after\n" || out.Position == nil || out.Offset != int64(len("before\n")) {
		t.Errorf("since: got %+v, %v; want the line written after, from its offset", out, err)
	}
	out, err = c.Output(ctx, id, httpapi.OutputOptions{Since: split.Add(-time.Hour), Offset: new(int64(3))})
	if err != nil || out.Output != "ore\nafter\n" {
		t.Errorf("since before the output, offset 3: got %+v, %v; want from the offset", out, err)
	}
	wantError(t, s.raw(t, http.MethodGet, "/"+id+"/output?since=10m", ""), http.StatusBadRequest)
}
