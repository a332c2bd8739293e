package agentproc_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// BenchmarkInputWatchEventLoop100 measures what input detection costs for
// 100 quiet event-loop processes, in percent of one core over a 2 s window
// once the watcher has backed off: Node prompts and Python asyncio prompts
// that await input (a look ends at the first thread, in an epoll wait on
// an instance that watches stdin), and Node servers with a stdin pipe they
// never read (each look reads the syscall and children files of all 7
// threads and the fdinfo of both epoll instances, and finds nothing). The
// baseline (idle) is the same servers without stdin, which are not watched.
func BenchmarkInputWatchEventLoop100(b *testing.B) {
	const procs = 100
	const window = 2 * time.Second
	for _, mode := range []struct {
		name, tool, script string
		stdin              bool
		ready              *regexp.Regexp // nil: wait until awaiting input
	}{
		{"agentproc/node-prompt", "node", "ask.js", true, nil},
		{"agentproc/python-prompt", "python3", "ask.py", true, nil},
		{"agentproc/node-server", "node", "serve.js", true, regexp.MustCompile(`port=`)},
		{"idle/node-server", "node", "serve.js", false, regexp.MustCompile(`port=`)},
	} {
		b.Run(mode.name, func(b *testing.B) {
			command := eventLoopCommand(b, mode.tool, mode.script)
			m := agentproc.New()
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ps := make([]*agentproc.Process, procs)
			for i := range ps {
				p, err := m.Start(ctx, agentproc.Request{Command: command, Stdin: mode.stdin})
				if err != nil {
					b.Fatal(err)
				}
				ps[i] = p
			}
			for _, p := range ps {
				if mode.ready != nil {
					if _, err := p.WaitMatch(ctx, mode.ready); err != nil {
						b.Fatalf("%s: %v", p.ID(), err)
					}
					continue
				}
				for next := int64(0); ; {
					c, err := p.WaitOutput(ctx, next)
					if err != nil || c.EOF {
						b.Fatalf("%s: %v, EOF %v before awaiting input", p.ID(), err, c.EOF)
					}
					if c.AwaitingInput {
						break
					}
					next = c.Next
				}
			}
			// Past the quiet period and the backoff steps: the window
			// measures the steady cost.
			time.Sleep(4 * time.Second) // measuring a rate over time, not synchronising
			reportCoreShare(b, window)
		})
	}
}
