package agentproc

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadEndWindow is how long TestPlaceAndStartThreadFate watches a thread
// that must outlive its goroutine.
const threadEndWindow = 100 * time.Millisecond

// TestPlaceAndStartThreadFate: placeAndStart gives the thread back to the
// scheduler after a start whose placement was undone, and keeps it locked
// when placing or moving back failed, since the thread may then be in a
// tree's cgroups: the runtime ends it with its goroutine instead of running
// other goroutines on it.
func TestPlaceAndStartThreadFate(t *testing.T) {
	for _, tt := range []struct {
		name      string
		stepErr   error
		restore   error
		wantEnded bool
	}{
		{"moved back", nil, nil, false},
		{"restore failed", nil, errors.New("move thread back"), true},
		{"step failed", errors.New("move thread into cgroup"), nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tids := make(chan int, 1)
			exited := make(chan error, 1)
			// Run with the goroutine locked once, as startOnLockedThread
			// does, and never on the main thread, which the runtime does
			// not end.
			run := func() {
				tids <- unix.Gettid()
				cmd := exec.Command("true")
				err := placeAndStart(cmd, func() (func() error, error) {
					if tt.stepErr != nil {
						return nil, tt.stepErr
					}
					return func() error { return tt.restore }, nil
				})
				if cmd.Process != nil {
					_ = cmd.Wait()
				}
				exited <- err
			}
			go func() {
				runtime.LockOSThread()
				if unix.Gettid() != unix.Getpid() {
					run()
					return
				}
				inner := make(chan struct{})
				go func() {
					defer close(inner)
					runtime.LockOSThread()
					run()
				}()
				<-inner
				runtime.UnlockOSThread()
			}()
			tid := <-tids
			select {
			case err := <-exited:
				if want := errors.Join(tt.stepErr, tt.restore); (err == nil) != (want == nil) {
					t.Errorf("placeAndStart: got %v, want %v", err, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("placeAndStart did not return within 10 s")
			}
			task := "/proc/self/task/" + strconv.Itoa(tid)
			if !tt.wantEnded {
				// A thread whose goroutine ends locked ends at once (the
				// failed cases: in well under a millisecond), so one still
				// there after threadEndWindow was given back.
				<-time.After(threadEndWindow)
				if _, err := os.Stat(task); err != nil {
					t.Errorf("thread %d ended with its goroutine (%v), want it given back to the scheduler", tid, err)
				}
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, err := os.Stat(task); os.IsNotExist(err) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("thread %d still there 5 s after its goroutine ended, want it ended with it", tid)
				}
				runtime.Gosched()
			}
		})
	}
}
