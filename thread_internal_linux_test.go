package agentproc

import (
	"errors"
	"os"
	"strconv"
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
