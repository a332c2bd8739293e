package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/llmtool"
)

const mcpHelp = `Serve the process tools over the Model Context Protocol on stdin and stdout,
for one agent (Claude Code, Codex, Gemini CLI, Cursor, or any MCP client).
The tools are those of package llmtool: execute, process_output,
process_wait, process_input, process_list and process_signal. Results are
plain text; long waits send progress notifications with the newest output
lines when the client asks for progress.

Everything runs as long as the client is connected: when stdin closes
(the client exits or disconnects), or on SIGINT, SIGTERM or SIGHUP, every
process is stopped (SIGTERM, then SIGKILL after --grace) before agentproc
exits. Logs go to stderr; stdout carries only the protocol.

Examples:
  # Claude Code:
  claude mcp add agentproc -- agentproc mcp

  # Any client's JSON settings:
  {"mcpServers": {"agentproc": {"command": "agentproc", "args": ["mcp"]}}}

  # Limits for every command (a cgroup v2 directory you may write), and a
  # state dir so that the next server stops what a killed one left running:
  agentproc mcp --cgroup /sys/fs/cgroup/agents --memory 2GiB --procs 256 \
    --state-dir ~/.local/state/agentproc
`

func runMCP(ctx context.Context, e *env, args []string) error {
	fs := newFlags("mcp", "[flags]", mcpHelp)
	var mf managerFlags
	wd, _ := os.Getwd()
	mf.register(fs, wd, "most processes this session may run at once; execute then returns a tool error (0: no cap)")
	mf.registerSandbox(fs, "workspace where this host supports it, else none")
	maxOutput := byteSize(llmtool.DefaultMaxOutput)
	fs.Var(&maxOutput, "max-output", "stop a command once its output passes this size (none: never)")
	rest, err := parse(fs, e, args, 0)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q: mcp takes flags only (a project directory is --workdir %s)", rest[0], rest[0])
	}
	opts, err := mf.options()
	if err != nil {
		return err
	}
	sb, err := mf.sandboxPolicy(true)
	if err != nil {
		return err
	}
	m := agentproc.New(append(opts, agentproc.WithMaxRunning(mf.maxRunning))...)
	if err := recovered(ctx, m, &mf, e.stderr); err != nil {
		m.Close()
		return err
	}
	if sb != nil {
		if err := probeSandbox(m, sb, mf.workdir); err != nil {
			// The default is refused as loudly as a chosen sandbox: an
			// MCP client hides stderr, so a warning there would leave the
			// agent running unconfined without anyone knowing.
			m.Close()
			return usagef("the workspace sandbox cannot confine commands in %s here: %v (--sandbox=none runs them unconfined)", mf.workdir, err)
		}
	}
	// The sandbox is the Toolbox's, per request: execute's description
	// then tells the model what its commands may reach.
	srv := newMCPServer(llmtool.New(m.Scope(""), mf.toolOptions(int64(maxOutput), sb)))
	out := &syncWriter{w: e.stdout}
	runErr := srv.Run(ctx, &mcp.IOTransport{Reader: newFrameFilter(e.stdin, out), Writer: out})
	// The client is gone (or a signal came): nothing it started may outlive
	// it. Shutdown gives every process the grace period at once.
	sctx, cancel := context.WithTimeout(context.Background(), mf.grace+5*time.Second)
	defer cancel()
	if err := m.Shutdown(sctx); err != nil {
		return fmt.Errorf("stopping the processes: %w", err)
	}
	mf.endSession()
	if runErr != nil && !errors.Is(runErr, context.Canceled) && !errors.Is(runErr, io.EOF) && ctx.Err() == nil {
		return runErr
	}
	return nil
}

// mcpInstructions is what the server tells the client about itself; clients
// show it to the model.
const mcpInstructions = `Run shell commands through these tools. Start servers, watchers and anything that keeps running with execute and run_in_background, then process_wait for its port or a line instead of sleeping; read only new output with process_output and the offset next; answer prompts with execute's stdin and process_input; stop with process_signal. Everything still running stops when this session ends.`

// newMCPServer returns an MCP server with tb's tools.
func newMCPServer(tb *llmtool.Toolbox) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentproc", Title: "agentproc", Version: version()},
		&mcp.ServerOptions{Instructions: mcpInstructions})
	for _, t := range tb.Tools() {
		tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
		if t.ReadOnly {
			tool.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		}
		srv.AddTool(tool, toolHandler(tb, t.Name))
	}
	return srv
}

// toolHandler runs one tool: its text is the result, an error is a result
// marked isError whose text tells the model what was wrong, as the
// specification asks for tool errors.
func toolHandler(tb *llmtool.Toolbox, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var progress llmtool.Progress
		if token := req.Params.GetProgressToken(); token != nil {
			var mu sync.Mutex // one notification at a time, in order
			var last float64
			notify := func(p float64, msg string) {
				mu.Lock()
				defer mu.Unlock()
				// Progress must increase (the specification): a heartbeat
				// repeats the last value plus a little.
				if p <= last {
					p = last + 1e-3
				}
				last = p
				// A lost notification is only a missed update: the result
				// carries the output in full.
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      p,
					Message:       msg,
				})
			}
			progress = func(written int64, newest string) { notify(float64(written), newest) }
			stop := heartbeat(ctx, func() { notify(0, "still running, no new output") })
			defer stop()
		}
		text, err := tb.Dispatch(ctx, name, req.Params.Arguments, progress)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
}

// heartbeatInterval is how often a call that waits notifies progress
// though nothing was printed: clients that time a call out unless progress
// resets the clock (the TypeScript SDK's resetTimeoutOnProgress, 60 s by
// default) then wait for a quiet build as long as it runs.
const heartbeatInterval = 5 * time.Second

// heartbeat calls beat every heartbeatInterval until ctx ends or stop is
// called; stop returns once no beat can follow.
func heartbeat(ctx context.Context, beat func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(heartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
