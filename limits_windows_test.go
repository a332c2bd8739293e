package agentproc_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestWindowsLimitProcs: under Procs 1 the shell is the job's only allowed
// process, so the child it tries to start is refused and the rest runs.
func TestWindowsLimitProcs(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	req := agentproc.Request{Command: `echo start & cmd /d /c echo child & echo end`}
	if got := lines(runOutput(t, m, req).Text); !slices.Contains(got, "child") {
		t.Fatalf("without a limit: got %q, want the child's line", got)
	}
	req.Limits = agentproc.Limits{Procs: 1}
	out := runOutput(t, m, req)
	got := lines(out.Text)
	if slices.Contains(got, "child") && agentproc.UnderWine() {
		t.Skipf("Wine does not enforce a job's active process limit (got %q)", got)
	}
	if slices.Contains(got, "child") || !slices.Contains(got, "start") || !slices.Contains(got, "end") {
		t.Errorf("under Procs 1: got %q, want start and end without the child", got)
	}
	if out.Limits.Procs != 1 {
		t.Errorf("Info.Limits.Procs: got %d, want 1", out.Limits.Procs)
	}
}

// TestWindowsLimitMemory: a commit of 256 MiB fails under a 64 MiB job
// memory limit and succeeds without one.
func TestWindowsLimitMemory(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	req := agentproc.Request{Command: `"` + exe + `"`, Env: map[string]string{agentproc.HelperModeEnv: "commit"}}
	if got := lines(runOutput(t, m, req).Text); !slices.Equal(got, []string{"committed"}) {
		t.Fatalf("without a limit: got %q, want [committed]", got)
	}
	req.Limits = agentproc.Limits{Memory: 64 << 20}
	got := strings.Join(lines(runOutput(t, m, req).Text), "\n")
	if got == "committed" && agentproc.UnderWine() {
		t.Skip("Wine does not enforce a job's memory limit")
	}
	if !strings.HasPrefix(got, "commit failed") {
		t.Errorf("under Memory 64 MiB: got %q, want the commit of 256 MiB refused", got)
	}
}

// TestWindowsLimitCPU: a CPU limit is accepted and the command runs. The
// rate itself is not measured here.
func TestWindowsLimitCPU(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	p, err := m.Start(agentproc.Request{Command: `echo capped`, Limits: agentproc.Limits{CPU: 0.5}})
	if errors.Is(err, agentproc.ErrUnsupported) && agentproc.UnderWine() {
		t.Skipf("Wine does not take a job CPU rate: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
	if got := lines(p.Output().Text); !slices.Equal(got, []string{"capped"}) {
		t.Errorf("got %q, want [capped]", got)
	}
}
