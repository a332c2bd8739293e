package agentproc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// MakeTestCgroup is makeTestCgroup, for the black-box tests.
var MakeTestCgroup = makeTestCgroup

// makeTestCgroup makes the cgroup dir for a test and removes it when the
// test ends: first what the patterns in also match (cgroups the code under
// test makes in dir, such as a host's agentproc-host or its trees'
// agentproc-*, or beside it in another cgroup v1 hierarchy), then dir. A
// cgroup cannot be removed while a process is in it, and a tree's last
// processes may still be leaving when the test ends, so removal is tried
// again for up to testTimeout; a cgroup gone already is fine, one still
// there after that is a test error. It returns Mkdir's error, and then
// removes nothing.
func makeTestCgroup(t testing.TB, dir string, also ...string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(testTimeout)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			err := removeTestCgroup(dir, also)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove test cgroup %s: %v", dir, err)
				return
			}
			<-tick.C
		}
	})
	return nil
}

// removeTestCgroup removes what the patterns in also match, then dir; a
// cgroup gone already counts as removed.
func removeTestCgroup(dir string, also []string) error {
	var errs []error
	for _, pattern := range also {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
