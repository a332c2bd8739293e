package llmtool

import (
	"context"
	"strings"
	"time"

	"github.com/agentproc/agentproc"
)

const (
	// progressInterval is the least time between two progress reports of
	// one wait: output that arrives faster is gathered, and the next report
	// carries its newest lines.
	progressInterval = time.Second
	// progressLines and progressLineBytes bound one report.
	progressLines     = 5
	progressLineBytes = 200
)

// follow reports p's newest output lines from offset on to progress while a
// wait lasts. It wakes on output (Process.WaitOutput), never on a timer while
// the process is quiet, so a wait on a silent process costs nothing. It
// returns a function that ends the reporting and returns once no report can
// follow, so none arrives after the tool's result.
func follow(ctx context.Context, p *agentproc.Process, offset int64, progress Progress) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		timer := time.NewTimer(0)
		defer timer.Stop()
		<-timer.C
		for {
			c, err := p.WaitOutput(ctx, offset)
			if err != nil {
				return
			}
			text := c.Data
			offset = c.Next
			// Gather what else is there already: only the newest lines
			// are reported, so the last read wins.
			for range maxReads {
				if c.EOF || c.Data == "" {
					break
				}
				if c, err = p.Read(offset); err != nil || c.Data == "" {
					break
				}
				text, offset = c.Data, c.Next
			}
			if lines := newestLines(text); lines != "" {
				progress(offset, lines)
			}
			if c.EOF {
				return
			}
			// A process waiting for input makes WaitOutput return at
			// once until it is answered: the pause below keeps that from
			// spinning, and gathers bursts of output into one report.
			timer.Reset(progressInterval)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// newestLines returns the last few non-empty lines of text, rendered as plain
// text and each cut to a readable length.
func newestLines(text string) string {
	lines := strings.Split(agentproc.PlainText(text), "\n")
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < progressLines; i-- {
		line := strings.TrimRight(lines[i], " \t\r")
		if line == "" {
			continue
		}
		if len(line) > progressLineBytes {
			line = strings.ToValidUTF8(line[:progressLineBytes], "") + " …"
		}
		keep = append(keep, line)
	}
	for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
		keep[i], keep[j] = keep[j], keep[i]
	}
	return strings.Join(keep, "\n")
}
