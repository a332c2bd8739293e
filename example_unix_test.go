//go:build unix

package agentproc_test

import (
	"context"
	"fmt"
	"regexp"
	"time"

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

func ExampleProcess_WaitMatch() {
	m := agentproc.New()
	defer m.Close()

	// A server is ready when it says so, not after a fixed sleep.
	p, err := m.Start(agentproc.Request{
		Command:    `echo "booting"; echo "listening on :8080"; sleep 1000`,
		Background: true,
	})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	line, err := p.WaitMatch(ctx, regexp.MustCompile(`listening on :\d+`))
	fmt.Println(line, err)
	_, _ = p.Stop(ctx)
	// Output: listening on :8080 <nil>
}

func ExampleProcess_Read() {
	m := agentproc.New()
	defer m.Close()

	p, err := m.Start(agentproc.Request{Command: `echo one; echo two`})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	_, _ = p.Wait(context.Background())
	// Follow the output by absolute offset: pass Next back to get only
	// what is new. Nothing is drained, so other readers are unaffected.
	first, _ := p.Read(0)
	fmt.Printf("%q next=%d eof=%v\n", first.Data, first.Next, first.EOF)
	again, _ := p.Read(first.Next)
	fmt.Printf("%q next=%d eof=%v\n", again.Data, again.Next, again.EOF)
	// Output:
	// "one\ntwo\n" next=8 eof=true
	// "" next=8 eof=true
}

func ExampleProcess_WriteStdin() {
	m := agentproc.New()
	defer m.Close()

	p, err := m.Start(agentproc.Request{Command: `read name; echo "hello, $name"`, Stdin: true})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	if _, err := p.WriteStdin([]byte("agent\n")); err != nil {
		fmt.Println("write:", err)
		return
	}
	_ = p.CloseStdin()
	_, _ = p.Wait(context.Background())
	fmt.Print(p.Output().Text)
	// Output: hello, agent
}

// A dev server is ready when its tree listens, whatever it prints and
// whichever port it picks; another process on the port does not count.
func ExampleProcess_WaitPort() {
	m := agentproc.New()
	defer m.Close()

	p, err := m.Start(agentproc.Request{
		Command:    "exec python3 -m http.server 0 --bind 127.0.0.1",
		Background: true,
	})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port, err := p.WaitPort(ctx, 0) // 0: the first port it listens on
	if err != nil {
		fmt.Println("not ready:", err, p.Output(agentproc.Plain).Text)
		return
	}
	fmt.Printf("serving on %s:%d\n", port.Addr, port.Port)
}

// Follow an installer until it asks something, then answer.
func ExampleChunk_awaitingInput() {
	m := agentproc.New()
	defer m.Close()

	p, err := m.Start(agentproc.Request{
		Command: `printf 'Proceed? [y/N] '; read answer; echo "answer: $answer"`,
		Stdin:   true,
	})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var next int64
	for {
		c, err := p.WaitOutput(ctx, next)
		if err != nil {
			fmt.Println("wait:", err)
			return
		}
		fmt.Print(c.Data)
		next = c.Next
		if c.AwaitingInput { // the prompt is out and the process reads its stdin
			_, _ = p.WriteStdin([]byte("y\n"))
			fmt.Println("y") // a pipe does not echo the answer
		}
		if c.EOF {
			return
		}
	}
	// Output:
	// Proceed? [y/N] y
	// answer: y
}
