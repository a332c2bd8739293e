//go:build unix

package agentproc_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// TestFailedStartReleasesEverything: a Start that fails at the start itself
// (a shell that does not exist), once the output log, the pipes or the
// terminal and the containment were set up, leaves no descriptor open, no
// log file and no process behind (spawn's deferred undo). It is not
// parallel so that no other test opens files meanwhile.
func TestFailedStartReleasesEverything(t *testing.T) {
	logDir := t.TempDir()
	shell := filepath.Join(t.TempDir(), "no-such-shell")
	m := newManager(t, agentproc.WithShell(shell, "-c"), agentproc.WithOutputLog(logDir, 0))
	reqs := []agentproc.Request{
		{Command: "true"},
		{Command: "cat", Stdin: true},
		{Command: "true", TTY: &agentproc.TTYSize{}},
	}
	start := func(req agentproc.Request) {
		t.Helper()
		p, err := m.Start(t.Context(), req)
		if err == nil || !strings.Contains(err.Error(), "start "+shell) {
			t.Fatalf("Start with a missing shell: got (%v, %v), want an error naming the start of %s", p, err, shell)
		}
	}
	// Warm up: the runtime's poller and the terminal code open their
	// descriptors on first use.
	for _, req := range reqs {
		start(req)
	}
	agentproc.WaitLogRemovals(m)
	before := countFDs(t)
	for range 10 {
		for _, req := range reqs {
			start(req)
		}
	}
	agentproc.WaitLogRemovals(m)
	if after := countFDs(t); after != before {
		t.Errorf("open descriptors after 30 failed Starts: got %d, want %d as before", after, before)
	}
	if entries, err := os.ReadDir(logDir); err != nil || len(entries) != 0 {
		t.Errorf("log dir after failed Starts: got %v (%v), want empty", entries, err)
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List after failed Starts: got %d processes, want 0", len(got))
	}
}
