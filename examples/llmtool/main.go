// Command llmtool shows agentproc behind the tools a language model is given
// (package llmtool): execute, process_output, process_wait, process_input,
// process_list and process_signal, each with a JSON Schema and a description
// that teaches the model how to use it, and a dispatcher that runs JSON tool
// calls against the library and answers in plain text. The agentproc
// command serves the same tools over MCP (agentproc mcp).
//
// It replays a short scripted session, as a model would drive it: start a
// server in the background, wait until it prints that it is ready, run a
// foreground command that sends it a request, read only the server's new
// output, stop it, and list what ran. Each call and its result are printed.
//
//	go run ./examples/llmtool          # the session
//	go run ./examples/llmtool -tools   # the tool definitions, as JSON
//
// The commands are sh scripts, so the session runs on Unix only.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/llmtool"
)

func main() {
	tools := flag.Bool("tools", false, "print the tool definitions as JSON and exit")
	flag.Parse()
	if *tools {
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(llmtool.Tools()); err != nil {
			log.Fatal(err)
		}
		return
	}
	if runtime.GOOS == "windows" {
		log.Fatal("the scripted session uses sh; run it on Unix")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// step is one tool call of the scripted session. Its arguments may name
// values that earlier results returned: {{server}} is the server's
// process_id and {{next}} the last next offset read from it.
type step struct {
	tool string
	args string
}

// session is what a model would send. The server makes a FIFO, says it is
// ready, and logs one line per request written to the FIFO.
var session = []step{
	{"execute", `{"command": "mkfifo requests && echo 'server: ready' && while :; do while read -r req; do echo \"server: handled $req\"; done < requests; done", "run_in_background": true}`},
	{"process_wait", `{"process_id": "{{server}}", "pattern": "ready"}`},
	{"execute", `{"command": "echo 'GET /health' > requests && echo 'client: request sent'"}`},
	{"process_output", `{"process_id": "{{server}}", "offset": {{next}}, "pattern": "handled GET /health"}`},
	{"process_signal", `{"process_id": "{{server}}", "signal": "terminate"}`},
	{"process_list", `{}`},
}

// run replays the session in a fresh directory and prints every call and
// result to w.
func run(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "llmtool")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// A workspace is a repository: WorkspaceSandbox keeps its .git
	// read-only. Without one, every command would warn that a tree may
	// create it (a .git made in the sandbox could plant hooks that git
	// runs outside it).
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		return err
	}

	m := agentproc.New(
		agentproc.WithWorkDir(func() string { return dir }),
		agentproc.WithGracePeriod(2*time.Second),
	)
	defer m.Close()
	// One conversation, one owner: its tools see only its processes. Where
	// the host can confine commands, they are confined to the work dir,
	// and the execute tool's description tells the model so.
	var opts llmtool.Options
	if agentproc.SandboxSupport().Supported {
		opts.Sandbox = agentproc.WorkspaceSandbox(dir)
	}
	tb := llmtool.New(m.Scope("conversation-1"), opts)

	fmt.Fprint(w, "tools:")
	for _, t := range tb.Tools() {
		fmt.Fprint(w, " ", t.Name)
	}
	fmt.Fprintln(w)

	var server string
	var next int64
	for _, c := range session {
		args := expand(c.args, server, next)
		fmt.Fprintf(w, "\n> %s %s\n", c.tool, args)
		res, err := tb.Dispatch(ctx, c.tool, json.RawMessage(args), nil)
		if err != nil {
			fmt.Fprintf(w, "< error: %v\n", err)
			continue
		}
		fmt.Fprintf(w, "%s", indent(res))

		// Remember what a model would read from the results.
		id, _ := field(res, "process_id")
		if c.tool == "execute" && strings.Contains(res, "state: running in the background") {
			server = id
		}
		if n, ok := field(res, "next"); ok && id == server {
			if _, err := fmt.Sscan(n, &next); err != nil {
				return err
			}
		}
	}
	if server == "" {
		return xerrors.New("the session never started its server")
	}
	return m.Close()
}

// field returns the value of the first "name: value" line of a result.
func field(res, name string) (string, bool) {
	for line := range strings.Lines(res) {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return strings.TrimSuffix(v, "\n"), true
		}
	}
	return "", false
}

// indent marks each line of a result with "< ".
func indent(res string) string {
	var sb strings.Builder
	for line := range strings.Lines(res) {
		sb.WriteString("< " + line)
	}
	return sb.String()
}

// expand fills in the placeholders of a call's arguments.
func expand(args, server string, next int64) string {
	return strings.NewReplacer("{{server}}", server, "{{next}}", fmt.Sprint(next)).Replace(args)
}
