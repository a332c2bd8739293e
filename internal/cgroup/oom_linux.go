package cgroup

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// oomWatch waits for the v1 memory controller's OOM notification on one
// cgroup. v1 has no memory.oom.group: the kernel would kill one process of
// the tree and the shell would run on, so the kernel's killer is turned off
// for the tree and the watch kills all of it at once (how soon the
// notification comes: docs/measurements.md).
//
// Every watch of the host process shares one goroutine, which waits in
// epoll for all their eventfds (oomWatcher): a goroutine per watch cost a
// wake-up and a hand-off on every exit, when the watch was stopped.
type oomWatch struct {
	efd   int // the eventfd, non-blocking; -1 once stopped
	onOOM func()
	fired atomic.Bool // a notification came
}

// oomWatcher is the goroutine of every OOM watch: it runs while there is
// a watch, and ends when the last one stops.
var oomWatcher struct {
	mu      sync.Mutex
	epfd    int               // the epoll set of the eventfds and wake
	wake    int               // an eventfd that tells the goroutine to look at watches
	watches map[int]*oomWatch // by eventfd
	running bool              // the goroutine runs (it ends once it sees no watch)
}

// watchOOM registers an eventfd for memory.oom_control through
// cgroup.event_control and calls onOOM, on a goroutine of its own, each
// time the memory controller runs out of memory in dir and calls the
// OOM killer. The notification comes before the kernel's kill, often
// before oom_kill or under_oom in memory.oom_control say anything, so it
// is not checked against them; it also fires when the cgroup is removed,
// which is why the watch is stopped before that.
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
	w := &oomWatch{efd: efd, onOOM: onOOM}
	if err := w.add(); err != nil {
		_ = unix.Close(efd)
		return nil, err
	}
	return w, nil
}

// add puts w in the watcher's epoll set, starting the goroutine if none
// runs.
func (w *oomWatch) add() error {
	ow := &oomWatcher
	ow.mu.Lock()
	defer ow.mu.Unlock()
	if !ow.running {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return xerrors.Errorf("epoll for the OOM watch: %w", err)
		}
		wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			_ = unix.Close(epfd)
			return xerrors.Errorf("eventfd for the OOM watch: %w", err)
		}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
			_ = unix.Close(wake)
			_ = unix.Close(epfd)
			return xerrors.Errorf("epoll for the OOM watch: %w", err)
		}
		ow.epfd, ow.wake, ow.watches, ow.running = epfd, wake, make(map[int]*oomWatch), true
		go watchLoop(epfd, wake)
	}
	if err := unix.EpollCtl(ow.epfd, unix.EPOLL_CTL_ADD, w.efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(w.efd)}); err != nil {
		return xerrors.Errorf("watch the OOM eventfd: %w", err)
	}
	ow.watches[w.efd] = w
	return nil
}

// watchLoop is the watcher's goroutine. An eventfd is read, and its
// watch found, under the lock that stop takes to close it, so that a
// number reused for another file is never read.
func watchLoop(epfd, wake int) {
	ow := &oomWatcher
	events := make([]unix.EpollEvent, 16)
	buf := make([]byte, 8)
	for {
		n, err := unix.EpollWait(epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// Cannot happen with a valid epoll set; end as when the last
			// watch stops, so that stop does not wait forever.
			n = 0
		}
		var fired []*oomWatch
		ow.mu.Lock()
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == wake {
				_, _ = unix.Read(wake, buf)
				continue
			}
			if w := ow.watches[fd]; w != nil {
				if k, _ := unix.Read(fd, buf); k == 8 {
					fired = append(fired, w)
				}
			}
		}
		if len(ow.watches) == 0 || err != nil {
			_ = unix.Close(wake)
			_ = unix.Close(epfd)
			ow.running = false
			ow.mu.Unlock()
			return
		}
		ow.mu.Unlock()
		for _, w := range fired {
			w.fired.Store(true)
			// Each kill on its own, so that one tree's (which on pure v1
			// polls until its cgroup is empty) does not hold up another's.
			go w.onOOM()
		}
	}
}

// stop ends the watch. An onOOM the watch's notification started before
// may still be running. When it was the last watch, the watcher's
// goroutine ends at once (not waited for: it only closes its two files).
func (w *oomWatch) stop() {
	ow := &oomWatcher
	ow.mu.Lock()
	if w.efd < 0 {
		ow.mu.Unlock()
		return
	}
	delete(ow.watches, w.efd)
	_ = unix.EpollCtl(ow.epfd, unix.EPOLL_CTL_DEL, w.efd, nil)
	_ = unix.Close(w.efd)
	w.efd = -1
	if len(ow.watches) == 0 {
		_, _ = unix.Write(ow.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
	ow.mu.Unlock()
}
