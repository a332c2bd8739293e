//go:build unix

package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

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

const wantTranscript = `tools: execute process_output process_wait process_input process_list process_signal

> execute {"command": "mkfifo requests && echo 'server: ready' && while :; do while read -r req; do echo \"server: handled $req\"; done < requests; done", "run_in_background": true}
< process_id: <id1>
< state: running in the background
< note: Call process_wait to wait until it is ready (a port or a line of output), process_output to read its output, and process_signal to stop it.

> process_wait {"process_id": "<id1>", "pattern": "ready"}
< process_id: <id1>
< state: running in the background
< matched: server: ready
< next: 14
< output:
< server: ready

> execute {"command": "echo 'GET /health' > requests && echo 'client: request sent'"}
< process_id: <id2>
< state: exited with code 0
< next: 21
< output:
< client: request sent

> process_output {"process_id": "<id1>", "offset": 14, "pattern": "handled GET /health"}
< process_id: <id1>
< state: running in the background
< matched: server: handled GET /health
< next: 42
< output:
< server: handled GET /health

> process_signal {"process_id": "<id1>", "signal": "terminate"}
< process_id: <id1>
< state: stopped by SIGTERM as asked (exit code 143)

> process_list {}
< process_id: <id2>
< command: echo 'GET /health' > requests && echo 'client: request sent'
< state: exited with code 0
< 
< process_id: <id1>
< command: mkfifo requests && echo 'server: ready' && while :; do while read -r req; do echo "server: handled $req"; done < requests; done
< state: stopped by SIGTERM as asked (exit code 143)
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
