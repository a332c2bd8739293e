//go:build unix

package main

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/llmtool"
)

// BenchmarkMCPProcessOutput is one process_output call on a running process,
// reading from its next offset (nothing new), as an agent polls: through
// agentproc mcp with the Go SDK's client over stdio (agentproc), and the
// same call dispatched in-process without MCP (in_process), so the ratio
// is what the protocol and the pipe cost.
func BenchmarkMCPProcessOutput(b *testing.B) {
	const command = "echo ready; exec sleep 3600"
	b.Run("agentproc", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := newGoClient(b, ctx, agentprocCmd("mcp", "--workdir", b.TempDir()))
		defer c.close()
		res, err := c.call(ctx, "execute", map[string]any{"command": command, "run_in_background": true}, false)
		if err != nil || res.isError {
			b.Fatalf("execute: %+v, %v", res, err)
		}
		id := field(res.text, "process_id")
		res, err = c.call(ctx, "process_output", map[string]any{"process_id": id, "wait_for": "ready"}, false)
		if err != nil || res.isError {
			b.Fatalf("process_output: %+v, %v", res, err)
		}
		next, _ := strconv.Atoi(field(res.text, "next"))
		args := map[string]any{"process_id": id, "offset": next}
		for b.Loop() {
			if res, err := c.call(ctx, "process_output", args, false); err != nil || res.isError {
				b.Fatalf("process_output: %+v, %v", res, err)
			}
		}
	})
	b.Run("in_process", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dir := b.TempDir()
		m := agentproc.New(agentproc.WithWorkDir(func() string { return dir }))
		defer m.Close()
		tb := llmtool.New(m.Scope(""), llmtool.Options{})
		res, err := tb.Dispatch(ctx, "execute", json.RawMessage(`{"command": "`+command+`", "run_in_background": true}`), nil)
		if err != nil {
			b.Fatal(err)
		}
		id := field(res, "process_id")
		res, err = tb.Dispatch(ctx, "process_output", json.RawMessage(`{"process_id": "`+id+`", "wait_for": "ready"}`), nil)
		if err != nil {
			b.Fatal(err)
		}
		args := json.RawMessage(`{"process_id": "` + id + `", "offset": ` + field(res, "next") + `}`)
		for b.Loop() {
			if _, err := tb.Dispatch(ctx, "process_output", args, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
