package agentproc

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOnThrowawayThread checks that concurrent callers each get their own
// fn's result back, that fn never runs on the main thread and the caller
// never goes on on fn's thread, and that the wake pipes kept for later
// calls stay within their bound and empty.
func TestOnThrowawayThread(t *testing.T) {
	t.Parallel()
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := errors.New("call " + strconv.Itoa(i))
			var tid int
			got := onThrowawayThread(func() error {
				tid = unix.Gettid()
				return want
			})
			switch {
			case got != want:
				errs <- errors.New("got " + errString(got) + ", want " + want.Error())
			case tid == unix.Getpid():
				errs <- errors.New(want.Error() + ": fn ran on the main thread")
			case unix.Gettid() == tid:
				errs <- errors.New(want.Error() + ": the caller went on on fn's thread")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if k := len(wakePipes); k > maxWakePipes {
		t.Errorf("%d wake pipes kept, want at most %d", k, maxWakePipes)
	}
	// A kept pipe is empty: a read finds nothing.
	select {
	case p := <-wakePipes:
		var b [1]byte
		if err := p[0].SetReadDeadline(time.Now()); err != nil {
			t.Fatal(err)
		}
		if n, err := p[0].Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read of a kept wake pipe: got %d bytes, error %v; want none (empty)", n, err)
		}
		_ = p[0].Close()
		_ = p[1].Close()
	default:
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// TestMainThreadHeld: while a user of mainHold is registered, the first
// call that lands on the main thread keeps it, parked, so that later
// calls never land there (and never pay onMainThread's detour); the main
// thread stays unconfined; and the last release gives it back, leaving no
// goroutine behind. Not parallel: other Managers would be users too.
func TestMainThreadHeld(t *testing.T) {
	release := useMainHold()
	defer release()
	nnp := func() error {
		// What a sandboxed start does first on its thread.
		return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	}
	const tries = 2000
	held := func() chan struct{} {
		mainHold.mu.Lock()
		defer mainHold.mu.Unlock()
		if mainHold.held == nil {
			return nil
		}
		return mainHold.gone
	}
	start := mainLandings.Load()
	calls := 0
	for ; calls < tries && mainLandings.Load() == start; calls++ {
		if err := onThrowawayThread(nnp); err != nil {
			t.Fatal(err)
		}
	}
	if mainLandings.Load() == start {
		t.Skipf("the runtime put none of %d calls on the main thread", tries)
	}
	t.Logf("call %d landed on the main thread", calls)
	// The call that landed returned its result before parking.
	var gone chan struct{}
	deadline := time.Now().Add(10 * time.Second)
	for gone = held(); gone == nil && time.Now().Before(deadline); gone = held() {
		runtime.Gosched()
	}
	if gone == nil {
		t.Fatal("a call landed on the main thread and did not keep it")
	}
	before := mainLandings.Load()
	for range 200 {
		if err := onThrowawayThread(nnp); err != nil {
			t.Fatal(err)
		}
	}
	if n := mainLandings.Load() - before; n != 0 {
		t.Errorf("%d of 200 calls landed on the held main thread, want none", n)
	}
	status, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(unix.Getpid()) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NoNewPrivs:\t0\n", "Seccomp:\t0\n"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("main thread status: want %q in\n%s", strings.TrimSpace(want), status)
		}
	}
	release()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the main thread was not given back 10 s after the last release")
	}
	if held() != nil {
		t.Error("mainHold still held after the last release")
	}
}
