//go:build unix

package agentproc_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentproc/agentproc"
)

// A command that prints forever is stopped once its output passes
// MaxOutput; the head and tail of what it wrote stay readable.
func ExampleRequest_maxOutput() {
	m := agentproc.New()
	defer m.Close()

	p, err := m.Start(context.Background(), agentproc.Request{Command: "yes", MaxOutput: 1 << 20})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := p.Wait(ctx)
	if err != nil {
		fmt.Println("wait:", err)
		return
	}
	out := p.Output()
	fmt.Println(info.Reason, out.Truncated.OriginalBytes > 1<<20, out.Text[:4] == "y\ny\n")
	// Output: output_limit true true
}

// When a chat ends, StopAll stops everything it started, and only that.
func ExampleScope_StopAll() {
	m := agentproc.New()
	defer m.Close()

	chat, other := m.Scope("chat-1"), m.Scope("chat-2")
	for range 3 {
		if _, err := chat.Start(context.Background(), agentproc.Request{Command: "exec sleep 60"}); err != nil {
			fmt.Println("start:", err)
			return
		}
	}
	keep, err := other.Start(context.Background(), agentproc.Request{Command: "exec sleep 60"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	infos, err := chat.StopAll(ctx)
	if err != nil {
		fmt.Println("stop:", err)
		return
	}
	for _, info := range infos {
		fmt.Println(info.Owner, info.Reason)
	}
	fmt.Println("chat-2 still running:", keep.Info().Running)
	// Output:
	// chat-1 killed
	// chat-1 killed
	// chat-1 killed
	// chat-2 still running: true
}
