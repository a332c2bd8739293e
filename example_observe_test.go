package agentproc_test

import (
	"context"
	"fmt"

	"github.com/agentproc/agentproc"
)

func ExamplePlainText() {
	// What a progress bar and a coloured status line write to a terminal...
	raw := "\x1b[1;32mFetching\x1b[0m deps\n 10%\r 55%\r\x1b[2K100% done\r\n"
	// ...and what the terminal shows.
	fmt.Print(agentproc.PlainText(raw))
	// Output:
	// Fetching deps
	// 100% done
}

func ExampleManager_Subscribe() {
	m := agentproc.New()
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := m.Subscribe(ctx)

	p, err := m.Start(agentproc.Request{Command: "exit 3"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	// Told when the job ends instead of polling for it.
	for e := range events {
		if e.Type == agentproc.EventExited && e.ID == p.ID() {
			fmt.Println("exited with", *e.Info.ExitCode)
			break
		}
	}
	// Output: exited with 3
}
