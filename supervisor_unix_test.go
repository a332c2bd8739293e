//go:build unix

package agentproc_test

import (
	"regexp"
	"testing"

	"github.com/agentproc/agentproc"
)

func TestStderrCaptured(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "echo out; echo err >&2; echo out2"})
	mustWait(t, p)
	if got, want := p.Output().Text, "out\nerr\nout2\n"; got != want {
		t.Errorf("output got %q, want %q", got, want)
	}
}

// TestTreeGone checks that background children and pipelines die with
// Stop, Close and the shell's own exit.
func TestTreeGone(t *testing.T) {
	t.Parallel()
	const tree = `sleep 1000 & echo pid=$!; sleep 1000 | sleep 1000 & echo pid=$!; echo ready; `
	stopVia := map[string]func(t *testing.T, m *agentproc.Manager, p *agentproc.Process){
		"stop": func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process) {
			info, err := p.Stop(testContext(t))
			if err != nil || info.Reason != agentproc.ReasonKilled {
				t.Errorf("Stop: got (%q, %v), want killed", info.Reason, err)
			}
		},
		"close": func(t *testing.T, m *agentproc.Manager, p *agentproc.Process) {
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if info := p.Info(); info.Running || info.Reason != agentproc.ReasonShutdown {
				t.Errorf("after Close: got %+v, want exited with reason shutdown", info)
			}
		},
		"shell exits": func(t *testing.T, _ *agentproc.Manager, p *agentproc.Process) {
			info := mustWait(t, p)
			if info.Leftovers < 3 {
				t.Errorf("Leftovers got %d, want at least 3", info.Leftovers)
			}
		},
	}
	for name, stop := range stopVia {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t)
			cmd := tree + "wait"
			if name == "shell exits" {
				cmd = tree + "exit 0"
			}
			p := mustStart(t, m, agentproc.Request{Command: cmd})
			waitForOutput(t, p, regexp.MustCompile(`ready`))
			pids := pidsIn(t, p.Output().Text)
			stop(t, m, p)
			requireGone(t, pids)
		})
	}
}
