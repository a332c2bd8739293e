package testleak

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestCheckFindsOnlyMarked: a child left running with the run's marker is
// reported and killed; one started without it (another run's, or a
// stranger) is never reported nor signalled.
func TestCheckFindsOnlyMarked(t *testing.T) {
	run := Mark()
	t.Cleanup(func() { os.Unsetenv(Env) })
	marked := exec.Command("sleep", "1000")
	other := exec.Command("sleep", "1000")
	other.Env = []string{Env + "=another-run"}
	for _, c := range []*exec.Cmd{marked, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	leaks := Check(run, 100*time.Millisecond)
	pids := make([]int, 0, len(leaks))
	for _, l := range leaks {
		pids = append(pids, l.PID)
	}
	if !slices.Equal(pids, []int{marked.Process.Pid}) {
		t.Fatalf("got leaks %v, want only pid %d", leaks, marked.Process.Pid)
	}
	Kill(run, leaks)
	done := make(chan error, 1)
	go func() { done <- marked.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the leaked process was not killed")
	}
	if got := Check(run, 0); len(got) != 0 {
		t.Errorf("got leaks %v after Kill, want none", got)
	}
	// A zombie's environ reads empty: the unmarked one must still run.
	if ok, _ := carries(other.Process.Pid, "another-run"); !ok {
		t.Errorf("the unmarked process was signalled")
	}
}
