package llmtool

import (
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

func TestEndedSentences(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		info agentproc.Info
		want string
	}{
		{agentproc.Info{Reason: agentproc.ReasonOOM, Limits: agentproc.Limits{Memory: 64 << 20}},
			"killed: out of memory (limit 64 MiB); use less memory, for example by processing the input in parts"},
		{agentproc.Info{Reason: agentproc.ReasonSignaled, ExitSignal: "SIGKILL", LikelyOOM: true},
			"killed by SIGKILL, probably because the machine ran out of memory; use less memory"},
		{agentproc.Info{Reason: agentproc.ReasonIdle, IdleTimeout: 10 * time.Minute},
			"stopped: it wrote no output for 10m0s"},
		{agentproc.Info{Reason: agentproc.ReasonTimeout, Timeout: 2 * time.Minute},
			"stopped: it was still running when its timeout of 2m0s passed"},
		{agentproc.Info{Reason: agentproc.ReasonExited}, ""},
		{agentproc.Info{Reason: agentproc.ReasonKilled}, ""},
		{agentproc.Info{Running: true}, ""},
	} {
		if got := ended(tt.info); got != tt.want {
			t.Errorf("ended(%s): got %q, want %q", tt.info.Reason, got, tt.want)
		}
	}
}

func TestStateWords(t *testing.T) {
	t.Parallel()
	code := func(n int) *int { return &n }
	for _, tt := range []struct {
		info agentproc.Info
		want string
	}{
		{agentproc.Info{Running: true, Background: true}, "running in the background"},
		{agentproc.Info{Running: true, AwaitingInput: true}, "running, waiting for input on stdin (answer with process_input)"},
		{agentproc.Info{Reason: agentproc.ReasonExited, ExitCode: code(2)}, "exited with code 2"},
		{agentproc.Info{Reason: agentproc.ReasonKilled, ExitCode: code(143), ExitSignal: "SIGTERM"}, "stopped by SIGTERM as asked (exit code 143)"},
		{agentproc.Info{Reason: agentproc.ReasonSignaled, ExitCode: code(137), ExitSignal: "SIGKILL"}, "killed by SIGKILL, which was not sent through these tools (exit code 137)"},
		{agentproc.Info{Reason: agentproc.ReasonOOM, ExitCode: code(137), Limits: agentproc.Limits{Memory: 64 << 20}},
			"killed: out of memory (limit 64 MiB); use less memory, for example by processing the input in parts (exit code 137)"},
		{agentproc.Info{Reason: agentproc.ReasonShutdown, ExitCode: code(143)}, "stopped: the server shut down (exit code 143)"},
	} {
		if got := state(tt.info); got != tt.want {
			t.Errorf("state(%+v): got %q, want %q", tt.info, got, tt.want)
		}
	}
}
