package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

func TestEndedSentences(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		info agentproc.Info
		want string
	}{
		{agentproc.Info{Reason: agentproc.ReasonOOM, Limits: agentproc.Limits{Memory: 64 << 20}},
			"killed: out of memory (limit 64 MiB); use less memory, for example by processing the input in parts"},
		{agentproc.Info{Reason: agentproc.ReasonSignaled, Signal: "SIGKILL", LikelyOOM: true},
			"killed by SIGKILL, probably because the machine ran out of memory; use less memory"},
		{agentproc.Info{Reason: agentproc.ReasonIdle, IdleTimeout: 10 * time.Minute},
			"stopped: it wrote no output for 10m0s"},
		{agentproc.Info{Reason: agentproc.ReasonTimeout, Timeout: 2 * time.Minute},
			"stopped: it was still running when its timeout of 2m0s passed"},
		{agentproc.Info{Reason: agentproc.ReasonExited}, ""},
		{agentproc.Info{Reason: agentproc.ReasonKilled}, ""},
		{agentproc.Info{Running: true}, ""},
	} {
		if got := ended(tt.info); got != tt.want {
			t.Errorf("ended(%s): got %q, want %q", tt.info.Reason, got, tt.want)
		}
	}
}

// TestExecuteFloodIsStopped runs a command that prints forever: the tool
// result says it was stopped for its output, and keeps its start and end.
func TestExecuteFloodIsStopped(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	defer m.Close()
	tb := NewToolbox(m.Scope("test"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := tb.Dispatch(ctx, "execute", json.RawMessage(`{"command": "yes"}`))
	if err != nil {
		t.Fatal(err)
	}
	var res executeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Reason != "output_limit" || !strings.HasPrefix(res.Ended, "stopped: its output passed 64 MiB") {
		t.Errorf("got reason %q ended %q, want output_limit and why", res.Reason, res.Ended)
	}
	if !strings.HasPrefix(res.Output, "y\ny\n") || res.Omitted == 0 {
		t.Errorf("output: got %.16q with %d bytes omitted, want the head and tail of the flood", res.Output, res.Omitted)
	}
}
