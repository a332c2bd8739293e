package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// TestMCPSurvivesMalformedLines: a line that is not JSON, one that is JSON
// but no JSON-RPC message, and one over the transport's 16 MiB limit each
// get a JSON-RPC error reply (-32700 or -32600, id null), and the session
// carries on: the process started before them still runs, and later calls
// are answered.
func TestMCPSurvivesMalformedLines(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := testDir(t)
	cmd := agentprocCmd("mcp", "--workdir", dir, "--grace", "2s", "--sandbox", "none")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	type reply struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	replies := make(chan reply)
	go func() {
		defer close(replies)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r reply
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				select {
				case replies <- r:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	next := func(what string) reply {
		t.Helper()
		select {
		case r, ok := <-replies:
			if !ok {
				t.Fatalf("%s: the session ended", what)
			}
			return r
		case <-ctx.Done():
			t.Fatalf("%s: no reply", what)
		}
		return reply{}
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	call := func(id int, tool string, args string) {
		send(`{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := next("initialize"); r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	sleeper, _ := json.Marshal(map[string]any{"command": sessionShell.sleep(3600), "run_in_background": true})
	call(2, "execute", string(sleeper))
	if r := next("execute"); r.Error != nil || !strings.Contains(string(r.Result), "running in the background") {
		t.Fatalf("execute: got %s, %+v", r.Result, r.Error)
	}
	for _, tt := range []struct {
		line string
		code int
	}{
		{"this is not json", -32700},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call"} trailing`, -32700},
		{`{"hello":"world"}`, -32600},
		{`{"jsonrpc":"2.0","id":4,"method":"x","params":"` + strings.Repeat("a", maxFrameBytes) + `"}`, -32700},
	} {
		send(tt.line)
		r := next("a malformed line")
		if r.Error == nil || r.Error.Code != tt.code || r.ID != nil {
			t.Errorf("line %.40q: got reply id %v, error %+v; want code %d and id null", tt.line, r.ID, r.Error, tt.code)
		}
	}
	call(5, "process_list", `{}`)
	if r := next("process_list"); r.Error != nil || !strings.Contains(string(r.Result), "running in the background") {
		t.Errorf("process_list after the malformed lines: got %s, %+v; want the sleeper still running", r.Result, r.Error)
	}
}
