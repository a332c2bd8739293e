package agentproc

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// An event loop (libuv in Node.js, Python's asyncio, anything built on
// epoll) never blocks on its stdin: its thread blocks in epoll_wait,
// epoll_pwait or epoll_pwait2 on an epoll instance, and the instance's
// /proc/PID/task/TID/fdinfo/EPFD lists what it watches, one line each:
//
//	tfd:        0 events:       19 data:                0  pos:0 ino:984774 sdev:fe00000
//
// A thread in an epoll wait whose instance watches the stdin for input
// (EPOLLIN), compared by inode and device like every other path here, is
// reading it. The fdinfo is read only for threads found in an epoll wait:
// the kernel formats the whole file, one line per watched descriptor, with
// the instance locked, so a server watching thousands of sockets costs
// proportionally more (and only while it writes nothing).
//
// The instance is looked up in the waiting thread's descriptor table, so
// an instance shared by threads, or inherited by a child that waits on it,
// is found through whichever thread waits. Matching the file rather than
// descriptor 0 also finds a terminal that libuv reopened under another
// number.

// epollTarget is one watched descriptor of an epoll instance, parsed from a
// "tfd:" line of its fdinfo. fd is the number the descriptor had when it
// was registered (it may have been closed or reused since: epoll watches
// the open file, not the number); id is the file, when the kernel printed
// ino and sdev (current kernels do; early ones printed only tfd, events and
// data).
type epollTarget struct {
	fd     int
	events uint32
	id     fileID
	hasID  bool
}

// parseEpollTarget parses one "tfd:" line of an epoll instance's fdinfo.
// Fields are "key: value" or "key:value"; tfd and events are required, ino
// and sdev count only together, unknown keys are skipped, and a repeated
// key, a missing value or a number out of range makes the line invalid.
// The line comes from the kernel, but it is parsed as if it came from
// anywhere: it is a format that has changed before.
func parseEpollTarget(line []byte) (epollTarget, bool) {
	var t epollTarget
	var ino, sdev uint64
	var seen struct{ fd, events, ino, sdev bool }
	once := func(b *bool) bool {
		if *b {
			return false
		}
		*b = true
		return true
	}
	f := bytes.Fields(line)
	if len(f) == 0 || !bytes.HasPrefix(f[0], []byte("tfd:")) {
		return epollTarget{}, false
	}
	for i := 0; i < len(f); i++ {
		key, val, ok := bytes.Cut(f[i], []byte(":"))
		if !ok || len(key) == 0 {
			return epollTarget{}, false
		}
		if len(val) == 0 {
			if i+1 == len(f) {
				return epollTarget{}, false
			}
			i++
			val = f[i]
		}
		var err error
		switch string(key) {
		case "tfd":
			var n int64
			if n, err = strconv.ParseInt(string(val), 10, 32); err == nil && (n < 0 || !once(&seen.fd)) {
				return epollTarget{}, false
			}
			t.fd = int(n)
		case "events":
			var n uint64
			if n, err = strconv.ParseUint(string(val), 16, 32); err == nil && !once(&seen.events) {
				return epollTarget{}, false
			}
			t.events = uint32(n)
		case "ino":
			if ino, err = strconv.ParseUint(string(val), 16, 64); err == nil && !once(&seen.ino) {
				return epollTarget{}, false
			}
		case "sdev":
			// The kernel's dev_t is 32 bits: 12 of major, 20 of minor.
			if sdev, err = strconv.ParseUint(string(val), 16, 32); err == nil && !once(&seen.sdev) {
				return epollTarget{}, false
			}
		}
		if err != nil {
			return epollTarget{}, false
		}
	}
	if !seen.fd || !seen.events {
		return epollTarget{}, false
	}
	if seen.ino && seen.sdev {
		// stat's st_dev encodes the same device the way Mkdev does.
		t.id = fileID{dev: unix.Mkdev(uint32(sdev>>20), uint32(sdev&0xfffff)), ino: ino}
		t.hasID = true
	}
	return t, true
}

// epollInputEvents are the event bits that mean "wake me when it is
// readable".
const epollInputEvents = unix.EPOLLIN | unix.EPOLLRDNORM

// epollWatchesInput reports whether the fdinfo of an epoll instance lists
// a target that is in, registered for input. A target without ino and sdev
// is compared through its descriptor number with isIn instead. Lines other
// than "tfd:" ones (pos, flags, mnt_id, ino of the instance itself) and
// invalid lines are skipped.
func epollWatchesInput(fdinfo []byte, in fileID, isIn func(fd int) bool) bool {
	for len(fdinfo) > 0 {
		var line []byte
		line, fdinfo, _ = bytes.Cut(fdinfo, []byte{'\n'})
		if !bytes.HasPrefix(line, []byte("tfd:")) {
			continue
		}
		t, ok := parseEpollTarget(line)
		if !ok || t.events&epollInputEvents == 0 {
			continue
		}
		if t.hasID && t.id == in || !t.hasID && isIn(t.fd) {
			return true
		}
	}
	return false
}

// maxFDInfo bounds how much of an epoll instance's fdinfo is read: one
// line (about 90 bytes) per watched descriptor, so some 45,000 of them.
const maxFDInfo = 4 << 20

// epollWaitsOn reports whether thread t of pid, blocked in an epoll wait
// on epfd, waits for l.in to become readable. The instance is looked up in
// the thread's own descriptor table (/proc/PID/task/TID/fdinfo).
func (l *stdinLook) epollWaitsOn(pid int, t procfs.Task, epfd int) bool {
	data, err := t.ReadInto("fdinfo/"+strconv.Itoa(epfd), &l.fdinfo, maxFDInfo)
	if err != nil {
		return false
	}
	return epollWatchesInput(data, l.in, func(fd int) bool { return fdIs(pid, fd, l.in) })
}
