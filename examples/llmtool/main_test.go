//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// uuidRE matches the process IDs, which change on every run.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// stableIDs replaces each distinct process ID with <id1>, <id2>, ... in the
// order they first appear, so the transcript still shows which is which.
func stableIDs(s string) string {
	names := map[string]string{}
	return uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := names[id]; !ok {
			names[id] = fmt.Sprintf("<id%d>", len(names)+1)
		}
		return names[id]
	})
}

const wantTranscript = `tools: execute process_output process_list process_signal

> execute {"command": "mkfifo requests && echo 'server: ready' && while :; do while read -r req; do echo \"server: handled $req\"; done < requests; done", "run_in_background": true}
< {"process_id":"<id1>","background":true,"running":true,"note":"Running in the background. Call process_output with wait_for to wait until it is ready, and process_signal to stop it."}

> process_output {"process_id": "<id1>", "wait_for": "ready"}
< {"process_id":"<id1>","running":true,"matched":"server: ready","output":"server: ready\n","next":14}

> execute {"command": "echo 'GET /health' > requests && echo 'client: request sent'"}
< {"process_id":"<id2>","running":false,"exit_code":0,"output":"client: request sent\n","next":21}

> process_output {"process_id": "<id1>", "offset": 14, "wait_for": "handled GET /health"}
< {"process_id":"<id1>","running":true,"matched":"server: handled GET /health","output":"server: handled GET /health\n","next":42}

> process_signal {"process_id": "<id1>", "signal": "terminate"}
< {"process_id":"<id1>","running":false,"exit_code":143,"reason":"killed","ended_by":"SIGTERM"}

> process_list {}
< {"processes":[{"process_id":"<id2>","command":"echo 'GET /health' > requests && echo 'client: request sent'","running":false,"exit_code":0},{"process_id":"<id1>","command":"mkfifo requests && echo 'server: ready' && while :; do while read -r req; do echo \"server: handled $req\"; done < requests; done","background":true,"running":false,"exit_code":143,"reason":"killed"}]}
`

func TestSessionTranscript(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput so far:\n%s", err, out.String())
	}
	got := stableIDs(out.String())
	if got != wantTranscript {
		gl, wl := strings.Split(got, "\n"), strings.Split(wantTranscript, "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("line %d:\ngot  %s\nwant %s", i+1, g, w)
			}
		}
	}
}

// dispatch runs one call and decodes its result, failing the test on error.
func dispatch(t *testing.T, tb *Toolbox, tool, args string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := tb.Dispatch(ctx, tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	var v map[string]any
	if err := json.Unmarshal(res, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTrailingAmpersandRunsInBackground(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	defer m.Close()
	tb := NewToolbox(m.Scope("test"))

	res := dispatch(t, tb, "execute", `{"command": "sleep 3600 &"}`)
	note, _ := res["note"].(string)
	if res["background"] != true || res["command"] != "sleep 3600" || !strings.Contains(note, "use run_in_background instead of &") {
		t.Fatalf("got %v, want the command run in the background without its &, and a note", res)
	}
}

func TestOutputFollowsWithNext(t *testing.T) {
	t.Parallel()
	m := agentproc.New(agentproc.WithOutputLimits(64, 64, 0))
	defer m.Close()
	tb := NewToolbox(m.Scope("test"))

	res := dispatch(t, tb, "execute", `{"command": "i=0; while [ $i -lt 100 ]; do echo line $i; i=$((i+1)); done"}`)
	out, _ := res["output"].(string)
	omitted, _ := res["omitted_bytes"].(float64)
	if !strings.HasPrefix(out, "line 0\n") || !strings.Contains(out, "bytes omitted ...]\n") || !strings.HasSuffix(out, "line 99\n") || omitted == 0 {
		t.Fatalf("got %v, want head, a marker and tail", res)
	}
	id, _ := res["process_id"].(string)
	next, _ := res["next"].(float64)
	res = dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "offset": %d}`, id, int64(next)))
	if res["output"] != "" || res["next"] != next || res["running"] != false {
		t.Fatalf("read from next: got %v, want nothing new", res)
	}

	res = dispatch(t, tb, "execute", `{"command": "echo one; sleep 0.1; echo two", "run_in_background": true}`)
	id, _ = res["process_id"].(string)
	res = dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "wait": true}`, id))
	if res["output"] != "one\ntwo\n" || res["running"] != false || res["exit_code"] != float64(0) {
		t.Fatalf("wait: got %v, want the whole output after exit", res)
	}
	res = dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "wait_for": "three"}`, id))
	if note, _ := res["note"].(string); !strings.Contains(note, "exited without printing a line that matches") {
		t.Fatalf("wait_for on an exited process: got %v, want a note that nothing matched", res)
	}
}

func TestOutputIsPlainText(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	defer m.Close()
	tb := NewToolbox(m.Scope("test"))

	res := dispatch(t, tb, "execute", `{"command": "printf '\\033[1;32mBuilding\\033[0m\\n'; for i in 1 2 3; do printf '\\r\\033[K%d/3' $i; done; printf '\\n\\033[32m  Local: http://localhost:\\033[1m5173\\033[22m/\\033[0m\\n'"}`)
	if want := "Building\n3/3\n  Local: http://localhost:5173/\n"; res["output"] != want {
		t.Fatalf("output: got %q, want %q", res["output"], want)
	}
	id, _ := res["process_id"].(string)
	res = dispatch(t, tb, "process_output", fmt.Sprintf(`{"process_id": %q, "wait_for": "localhost:\\d+/"}`, id))
	if res["matched"] != "  Local: http://localhost:5173/" {
		t.Fatalf("wait_for: got %v, want the rendered line", res)
	}
}
