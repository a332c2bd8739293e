package agentproc_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentproc/agentproc"
)

// An agent that may crash keeps its state in a directory (on tmpfs where it
// can), asks what the previous run left, and starts a server that must
// survive its own restarts with Detach.
func ExampleWithStateDir() {
	dir, err := os.MkdirTemp("", "agent-state")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	m := agentproc.New(agentproc.WithStateDir(dir))
	left, err := m.Recovered(context.Background())
	if err != nil {
		fmt.Println("state dir:", err)
		return
	}
	fmt.Println("left by the previous run:", len(left))

	p, err := m.Start(agentproc.Request{Command: "echo serving", Detach: true})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	info, _ := p.Wait(context.Background())
	fmt.Println(info.Detached, *info.ExitCode, p.Output().Text)
	_ = m.Close()
	// Output:
	// left by the previous run: 0
	// true 0 serving
}
