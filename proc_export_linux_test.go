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
	armed map[int]int // reads left to fake; -1: every read
	faked map[int]int
}

// EmptyNextEnvironRead has the next marker read of pid's environment see
// what a read between exec's switch to the new program's memory and the
// setup of its stack sees: an empty environment, none set up. Later reads
// are real. It returns how many reads of pid have seen that since the
// call. The hook is process-wide: a test that arms it must not run beside
// others that sweep (no t.Parallel), or their reads could take the one
// meant for its own.
func EmptyNextEnvironRead(t testing.TB, pid int) (faked func() int) {
	return emptyEnvironReads(t, pid, 1)
}

// EmptyEnvironReads is EmptyNextEnvironRead for every read of pid until
// the test ends: a process stuck in exec.
func EmptyEnvironReads(t testing.TB, pid int) (faked func() int) {
	return emptyEnvironReads(t, pid, -1)
}

func emptyEnvironReads(t testing.TB, pid, n int) (faked func() int) {
	emptyReads.once.Do(func() {
		emptyReads.armed = make(map[int]int)
		emptyReads.faked = make(map[int]int)
		hook := func(pid int) bool {
			emptyReads.mu.Lock()
			defer emptyReads.mu.Unlock()
			left := emptyReads.armed[pid]
			switch {
			case left == 0:
				return false
			case left == 1:
				delete(emptyReads.armed, pid)
			case left > 1:
				emptyReads.armed[pid] = left - 1
			}
			emptyReads.faked[pid]++
			return true
		}
		environEmptyHook.Store(&hook)
	})
	emptyReads.mu.Lock()
	emptyReads.armed[pid] = n
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
