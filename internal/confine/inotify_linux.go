package confine

import (
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadInotify drains the non-blocking inotify instance ino and calls fn
// with each event's mask, watch descriptor and name (empty for an event
// on the watched directory itself). It returns when a read finds nothing
// more (EAGAIN) or fails. An overflow of the kernel's queue
// (IN_Q_OVERFLOW) is not passed to fn: it means events were lost, so
// that any watch may have changed, and ReadInotify reports it instead,
// so that each caller treats it as "everything changed" rather than as
// one watch's event. The Manager's two instances (DirWatcher's for the
// missing paths of built policies, the hidden-link walk's) read through
// it; it keeps no state, so the caller's lock decides who drains.
func ReadInotify(ino int, fn func(mask uint32, wd int32, name string)) (overflow bool) {
	var buf [4096]byte
	for {
		n, err := unix.Read(ino, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return overflow
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := min(n, off+unix.SizeofInotifyEvent+int(ev.Len))
			name := ""
			if ev.Len > 0 {
				// The kernel pads the name with NULs to an aligned length.
				raw := buf[off+unix.SizeofInotifyEvent : end]
				if i := slices.Index(raw, 0); i >= 0 {
					raw = raw[:i]
				}
				name = string(raw)
			}
			off = end
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				overflow = true
				continue
			}
			fn(ev.Mask, ev.Wd, name)
		}
	}
}
