//go:build unix

package llmtool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/llmtool"
)

// A model's tool call, dispatched: the result is plain text, "name: value"
// lines and then the output.
func ExampleToolbox_Dispatch() {
	m := agentproc.New()
	defer m.Close()
	tb := llmtool.New(m.Scope("conversation-1"), llmtool.Options{})

	res, err := tb.Dispatch(context.Background(), "execute",
		json.RawMessage(`{"command": "echo hello; exit 3"}`), nil)
	if err != nil {
		fmt.Println("tool error:", err) // the text to return to the model
		return
	}
	// Everything but the process_id, which differs on every run.
	_, rest, _ := strings.Cut(res, "\n")
	fmt.Print(rest)
	// Output:
	// state: exited with code 3
	// next: 6
	// output:
	// hello
}
