//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
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

// BenchmarkMCPProcessOutputRawClient is BenchmarkMCPProcessOutput/agentproc
// with a client that writes each JSON-RPC request and reads the reply line
// by hand: the server's share of the round trip, without the SDK client's.
func BenchmarkMCPProcessOutputRawClient(b *testing.B) {
	cmd := agentprocCmd("mcp", "--workdir", b.TempDir())
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		in.Close()
		_ = cmd.Wait()
	}()
	r := bufio.NewReaderSize(out, 1<<20)
	id := 0
	call := func(method string, params any) string {
		id++
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := in.Write(append(req, '\n')); err != nil {
			b.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		var resp struct {
			Result struct {
				Content []struct{ Text string }
				IsError bool
			}
			Error *struct{ Message string }
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil || resp.Error != nil || resp.Result.IsError {
			b.Fatalf("%s: %s", method, line)
		}
		if len(resp.Result.Content) == 0 {
			return ""
		}
		return resp.Result.Content[0].Text
	}
	call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "bench", "version": "1"}})
	if _, err := in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		b.Fatal(err)
	}
	text := call("tools/call", map[string]any{"name": "execute", "arguments": map[string]any{"command": "echo ready; exec sleep 3600", "run_in_background": true}})
	pid := field(text, "process_id")
	text = call("tools/call", map[string]any{"name": "process_output", "arguments": map[string]any{"process_id": pid, "wait_for": "ready"}})
	next, _ := strconv.Atoi(field(text, "next"))
	params := map[string]any{"name": "process_output", "arguments": map[string]any{"process_id": pid, "offset": next}}
	for b.Loop() {
		call("tools/call", params)
	}
}
