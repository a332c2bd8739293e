package llmtool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/internal/testleak"
	"github.com/agentproc/agentproc/llmtool"
)

// listenEnv makes the test binary a server that listens on the port it
// names, on 127.0.0.1, until it is killed: the helper-process pattern.
const listenEnv = "AGENTPROC_LLMTOOL_LISTEN"

func TestMain(m *testing.M) {
	if port := os.Getenv(listenEnv); port != "" {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("listening on", l.Addr())
		select {}
	}
	goleak.VerifyTestMain(leakChecked{m})
}

// TestToolSchemas checks what a model API requires of a tool definition,
// and that every parameter is explained to the model.
func TestToolSchemas(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"execute":        {"command", "run_in_background", "stdin", "timeout", "workdir"},
		"process_output": {"offset", "pattern", "process_id", "wait"},
		"process_wait":   {"offset", "pattern", "port", "process_id", "timeout"},
		"process_input":  {"close", "process_id", "text"},
		"process_list":   nil,
		"process_signal": {"process_id", "signal"},
	}
	tools := llmtool.Tools()
	if len(tools) != len(want) {
		t.Fatalf("got %d tools, want %d", len(tools), len(want))
	}
	for _, tool := range tools {
		b, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatalf("%s: schema does not encode: %v", tool.Name, err)
		}
		var schema struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
			Additional *bool                     `json:"additionalProperties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		props, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		if schema.Type != "object" || schema.Additional == nil || *schema.Additional {
			t.Errorf("%s: schema %s, want a closed object", tool.Name, b)
		}
		var names []string
		for name, p := range schema.Properties {
			names = append(names, name)
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s.%s has no description", tool.Name, name)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, props) {
			t.Errorf("%s: properties %v, want %v", tool.Name, names, props)
		}
		for _, r := range schema.Required {
			if !slices.Contains(names, r) {
				t.Errorf("%s: required %q is not a property", tool.Name, r)
			}
		}
		if len(tool.Description) < 80 {
			t.Errorf("%s: description %q is too short to teach anything", tool.Name, tool.Description)
		}
	}
	// The lessons the descriptions must carry.
	desc := map[string]string{}
	for _, tool := range tools {
		desc[tool.Name] = tool.Description
	}
	for tool, lesson := range map[string]string{
		"execute":        "run_in_background",
		"process_output": "pattern",
		"process_wait":   "instead of sleeping",
		"process_input":  "\\n to press Enter",
	} {
		if !strings.Contains(desc[tool], lesson) {
			t.Errorf("%s description does not mention %s", tool, lesson)
		}
	}
	if !strings.Contains(desc["execute"], "Never end a command with `&`") {
		t.Errorf("execute description does not forbid a trailing &")
	}
	if !strings.Contains(desc["execute"], "Commands cannot prompt") {
		t.Errorf("execute description does not say that commands cannot prompt")
	}
	if !strings.Contains(desc["process_output"], "pass back next") {
		t.Errorf("process_output description does not teach passing back next")
	}
}

func TestDispatchRejectsBadCalls(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	defer m.Close()
	tb := llmtool.New(m.Scope("test"), llmtool.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	const unknownID = "00000000-0000-0000-0000-000000000000"
	for _, c := range []struct{ tool, args, want string }{
		{"run_shell", `{}`, `unknown tool "run_shell"`},
		{"execute", `{}`, "command is required"},
		{"execute", `{"command": "  "}`, "command is required"},
		{"execute", `{"command": "true", "background": true}`, `unknown field "background"`},
		{"execute", `{"command": "true", "timeout": "10s"}`, "invalid arguments"},
		{"execute", `{"command": "true", "timeout": 100000}`, "timeout must be between"},
		{"execute", `{"command": "true", "timeout": -1}`, "timeout must be between"},
		{"execute", `{"command": "true", "timeout": 0}`, "timeout must be between"},
		// 18446744074 s is 2^64 ns and a little: multiplied first, it
		// wrapped to 290 ms and passed the range check.
		{"execute", `{"command": "true", "timeout": 18446744074}`, "timeout must be between"},
		{"execute", `{"command": "true", "workdir": "/does/not/exist"}`, "could not start"},
		{"process_output", `{}`, "process_id is required"},
		{"process_output", `{"process_id": "` + unknownID + `"}`, "no process"},
		{"process_output", `{"process_id": "` + unknownID + `", "wait_for": "("}`, "not a valid regular expression"},
		{"process_output", `{"process_id": "` + unknownID + `", "pattern": "("}`, "not a valid regular expression"},
		{"process_output", `{"process_id": "` + unknownID + `", "pattern": "a", "wait_for": "b"}`, "give pattern only"},
		{"process_output", `{"process_id": "` + unknownID + `", "offset": -1}`, "offset must not be negative"},
		{"process_signal", `{"process_id": "` + unknownID + `", "signal": "hup"}`, "signal must be"},
		{"process_signal", `{"process_id": "` + unknownID + `", "signal": "kill"}`, "no process"},
		{"process_wait", `{"process_id": "` + unknownID + `"}`, "no process"},
		{"process_wait", `{"process_id": "` + unknownID + `", "port": 70000}`, "port must be between"},
		{"process_wait", `{"process_id": "` + unknownID + `", "port": 80, "pattern": "x"}`, "not both"},
		{"process_wait", `{"process_id": "` + unknownID + `", "timeout": 100000}`, "timeout must be between"},
		{"process_wait", `{"process_id": "` + unknownID + `", "timeout": 18446744074}`, "timeout must be between"},
		{"process_wait", `{"process_id": "` + unknownID + `", "timeout": 0}`, "timeout must be between"},
		{"process_wait", `{"process_id": "` + unknownID + `", "pattern": "("}`, "pattern is not a valid"},
		{"process_input", `{"process_id": "` + unknownID + `"}`, "give text"},
		{"process_input", `{"process_id": "` + unknownID + `", "text": "y\n"}`, "no process"},
		{"process_list", `{"all": true}`, `unknown field "all"`},
	} {
		res, err := tb.Dispatch(ctx, c.tool, json.RawMessage(c.args), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: got %s, %v; want an error containing %q", c.tool, c.args, res, err, c.want)
		}
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("bad calls started %d processes", len(got))
	}

	res, err := tb.Dispatch(ctx, "process_list", nil, nil)
	if err != nil || res != "No processes.\n" {
		t.Errorf("process_list with no arguments: got %s, %v; want an empty list", res, err)
	}
}

// leakChecked runs the tests, then fails the run if a process they started
// is still alive (internal/testleak), killing it.
type leakChecked struct{ m *testing.M }

func (l leakChecked) Run() int {
	run := testleak.Mark()
	code := l.m.Run()
	if leaks := testleak.Check(run, 5*time.Second); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, testleak.Report(leaks))
		testleak.Kill(run, leaks)
		code = 1
	}
	return code
}

// TestOutputOffsetPastEnd: an offset past the end of the output, from which
// nothing could ever show, is said so in the result instead of "no new
// output" forever; pattern and wait_for are one argument of two names.
func TestOutputOffsetPastEnd(t *testing.T) {
	t.Parallel()
	m := agentproc.New()
	defer m.Close()
	tb := llmtool.New(m.Scope("test"), llmtool.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := tb.Dispatch(ctx, "execute", json.RawMessage(`{"command": "echo hello"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(strings.SplitN(res, "\n", 2)[0], "process_id: ")
	res, err = tb.Dispatch(ctx, "process_output", json.RawMessage(`{"process_id": "`+id+`", "offset": 1000}`), nil)
	// 6 bytes: "hello\n"; 7 where echo ends its line with CR LF (cmd.exe).
	if err != nil || !(strings.Contains(res, "offset 1000 is past the end of the output (6 bytes so far)") ||
		strings.Contains(res, "offset 1000 is past the end of the output (7 bytes so far)")) {
		t.Errorf("offset past the end: got %q, %v; want a note that says so", res, err)
	}
	for _, name := range []string{"pattern", "wait_for"} {
		res, err = tb.Dispatch(ctx, "process_output", json.RawMessage(`{"process_id": "`+id+`", "`+name+`": "hel+o"}`), nil)
		if err != nil || !strings.Contains(res, "matched: hello\n") {
			t.Errorf("process_output with %s: got %q, %v; want the match", name, res, err)
		}
	}
}
