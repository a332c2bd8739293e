//go:build unix

package agentproc_test

import (
	"context"
	"fmt"

	"github.com/agentproc/agentproc"
)

// The Output example lives in a Unix-only file because the exact byte
// counts depend on the shell's line endings (cmd.exe writes CRLF).

func ExampleProcess_Output() {
	m := agentproc.New(agentproc.WithOutputLimits(6, 6, 0))
	defer m.Close()

	p, err := m.Start(agentproc.Request{Command: "printf 'aaaaa\\nbbbbb\\nccccc\\nddddd\\n'"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	if _, err := p.Wait(context.Background()); err != nil {
		fmt.Println("wait:", err)
		return
	}
	out := p.Output()
	fmt.Println("omitted:", out.Truncated.OmittedBytes > 0)
	fmt.Println(out.Text)
	// Output:
	// omitted: true
	// aaaaa
	// [... 12 bytes omitted ...]
	// ddddd
}
