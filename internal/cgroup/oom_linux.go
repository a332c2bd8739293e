package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// oomWatch waits for the v1 memory controller's OOM notification on one
// cgroup. v1 has no memory.oom.group: the kernel would kill one process of
// the tree and the shell would run on, so the kernel's killer is turned off
// for the tree and the watch kills all of it at once (how soon the
// notification comes: docs/measurements.md).
type oomWatch struct {
	f     *os.File // the eventfd, non-blocking, so a Read parks in the poller
	done  chan struct{}
	fired atomic.Bool // a notification came
}

// watchOOM registers an eventfd for memory.oom_control through
// cgroup.event_control and calls onOOM, from its own goroutine, each time
// the memory controller runs out of memory in dir and calls the OOM killer.
// The notification comes before the kernel's kill, often before oom_kill
// or under_oom in memory.oom_control say anything, so it is not checked
// against them; it also fires when the cgroup is removed, which is why the
// watch is stopped before that.
func watchOOM(dir string, onOOM func()) (*oomWatch, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, xerrors.Errorf("eventfd for the OOM watch: %w", err)
	}
	control := filepath.Join(dir, "memory.oom_control")
	cfd, err := unix.Open(control, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(efd)
		return nil, xerrors.Errorf("open %s: %w", control, err)
	}
	// The kernel holds its own reference to the control file once the
	// event is registered.
	defer unix.Close(cfd)
	if err := writeFile(dir, "cgroup.event_control", fmt.Sprintf("%d %d", efd, cfd)); err != nil {
		_ = unix.Close(efd)
		return nil, err
	}
	w := &oomWatch{f: os.NewFile(uintptr(efd), "oom eventfd"), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		buf := make([]byte, 8)
		for {
			if _, err := w.f.Read(buf); err != nil {
				return // closed by stop
			}
			w.fired.Store(true)
			onOOM()
		}
	}()
	return w, nil
}

// stop ends the watch and waits for its goroutine.
func (w *oomWatch) stop() {
	_ = w.f.Close()
	<-w.done
}
