package agentproc

import (
	"sync"
	"testing"
)

// emptyReads is what environEmptyHook answers in tests: the PIDs whose
// next marker read is to see what a read during an exec sees, and how many
// reads of each did.
var emptyReads struct {
	once  sync.Once
	mu    sync.Mutex
	armed map[int]armedRead
	faked map[int]int
}

// armedRead is how many reads of a PID to fake (-1: every read), and
// whether its stat is to show no environment set up.
type armedRead struct {
	left  int
	unset bool
}

// EmptyNextEnvironRead has the next marker read of pid's environment see
// what a read between exec's switch to the new program's memory and the
// setup of its stack sees: an empty environment, none set up. Later reads
// are real. It returns how many reads of pid have seen that since the
// call. The hook is process-wide: a test that arms it must not run beside
// others that sweep (no t.Parallel), or their reads could take the one
// meant for its own.
func EmptyNextEnvironRead(t testing.TB, pid int) (faked func() int) {
	return emptyEnvironReads(t, pid, armedRead{1, true})
}

// EmptyEnvironReads is EmptyNextEnvironRead for every read of pid until
// the test ends: a process stuck in exec.
func EmptyEnvironReads(t testing.TB, pid int) (faked func() int) {
	return emptyEnvironReads(t, pid, armedRead{-1, true})
}

// EmptyNextEnvironReadJustBefore is EmptyNextEnvironRead with pid's stat
// showing its environment set up: what a read sees that came just before
// the exec set it up, with stat read just after.
func EmptyNextEnvironReadJustBefore(t testing.TB, pid int) (faked func() int) {
	return emptyEnvironReads(t, pid, armedRead{1, false})
}

func emptyEnvironReads(t testing.TB, pid int, a armedRead) (faked func() int) {
	emptyReads.once.Do(func() {
		emptyReads.armed = make(map[int]armedRead)
		emptyReads.faked = make(map[int]int)
		hook := func(pid int) (empty, unset bool) {
			emptyReads.mu.Lock()
			defer emptyReads.mu.Unlock()
			a := emptyReads.armed[pid]
			switch {
			case a.left == 0:
				return false, false
			case a.left == 1:
				delete(emptyReads.armed, pid)
			case a.left > 1:
				a.left--
				emptyReads.armed[pid] = a
			}
			emptyReads.faked[pid]++
			return true, a.unset
		}
		environEmptyHook.Store(&hook)
	})
	emptyReads.mu.Lock()
	emptyReads.armed[pid] = a
	emptyReads.faked[pid] = 0
	emptyReads.mu.Unlock()
	t.Cleanup(func() {
		emptyReads.mu.Lock()
		delete(emptyReads.armed, pid)
		delete(emptyReads.faked, pid)
		emptyReads.mu.Unlock()
	})
	return func() int {
		emptyReads.mu.Lock()
		defer emptyReads.mu.Unlock()
		return emptyReads.faked[pid]
	}
}

// EnvironHooks are the two ways a marker read can come back empty for a
// marked process, to arm for its next read: during its exec (stat shows no
// environment set up), or just before the exec set it up, with stat read
// just after.
var EnvironHooks = []struct {
	Name string
	Arm  func(testing.TB, int) func() int
}{
	{"mid-exec", EmptyNextEnvironRead},
	{"just before", EmptyNextEnvironReadJustBefore},
}
