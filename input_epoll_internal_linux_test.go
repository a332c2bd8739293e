package agentproc

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestParseEpollTarget parses lines in the kernel's formats, old and new,
// and rejects malformed ones.
func TestParseEpollTarget(t *testing.T) {
	t.Parallel()
	pipe := fileID{dev: unix.Mkdev(254, 0), ino: 0x984774}
	tests := []struct {
		line string
		want epollTarget
		ok   bool
	}{
		// Node's stdin pipe, as Linux 6 prints it.
		{"tfd:        0 events:       19 data:                0  pos:0 ino:984774 sdev:fe00000",
			epollTarget{fd: 0, events: 0x19, id: pipe, hasID: true}, true},
		// A minor above 255 and a major above 255.
		{"tfd:       17 events: 80000001 data: 11 pos:0 ino:1a sdev:10100345",
			epollTarget{fd: 17, events: 0x80000001, id: fileID{dev: unix.Mkdev(0x101, 0x345), ino: 0x1a}, hasID: true}, true},
		// Linux 3.8's line: no pos, ino or sdev.
		{"tfd:        3 events:        1 data:                0",
			epollTarget{fd: 3, events: 1}, true},
		// ino without sdev names no file.
		{"tfd: 4 events: 1 data: 0 pos:0 ino:1a",
			epollTarget{fd: 4, events: 1}, true},
		// Unknown keys are skipped.
		{"tfd: 5 events: 4 data: 0 pos:0 ino:2 sdev:3 new:7",
			epollTarget{fd: 5, events: 4, id: fileID{dev: unix.Mkdev(0, 3), ino: 2}, hasID: true}, true},
		{"", epollTarget{}, false},
		{"pos:\t0", epollTarget{}, false},
		{"ino:\t1057", epollTarget{}, false},
		{"tfd:", epollTarget{}, false},
		{"tfd: 0", epollTarget{}, false},                                // no events
		{"tfd: -1 events: 1", epollTarget{}, false},                     // negative descriptor
		{"tfd: 99999999999 events: 1", epollTarget{}, false},            // out of range
		{"tfd: 0 events: 1 events: 1", epollTarget{}, false},            // repeated
		{"tfd: 0 tfd: 1 events: 1", epollTarget{}, false},               // repeated
		{"tfd: 0 events: 1ffffffff", epollTarget{}, false},              // more than 32 bits
		{"tfd: 0 events: zz", epollTarget{}, false},                     // not hex
		{"tfd: 0 events: 1 ino:xyz sdev:1", epollTarget{}, false},       // not hex
		{"tfd: 0 events: 1 ino:1 sdev:100000000", epollTarget{}, false}, // dev_t is 32 bits
		{"tfd: 0 events: 1 bare", epollTarget{}, false},                 // a token without a key
		{"tfd: 0 events: 1 :5", epollTarget{}, false},                   // an empty key
		{"tfd: 0 events: 1 data:", epollTarget{}, false},                // a key without a value
		{"tfd 0 events: 1", epollTarget{}, false},
	}
	for _, tt := range tests {
		got, ok := parseEpollTarget([]byte(tt.line))
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseEpollTarget(%q): got %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// TestEpollWatchesInput reads whole fdinfo files: the instance's own
// header lines are skipped, a target counts only when registered for
// input, and a target without ino and sdev is compared through its
// descriptor.
func TestEpollWatchesInput(t *testing.T) {
	t.Parallel()
	in := fileID{dev: unix.Mkdev(0, 0xf), ino: 0x3a4a}
	header := "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t26\n"
	never := func(int) bool { return false }
	tests := []struct {
		name   string
		fdinfo string
		isIn   func(int) bool
		want   bool
	}{
		{"stdin for input", header +
			"tfd:       15 events:       19 data:                f  pos:0 ino:2bbf sdev:f\n" +
			"tfd:        0 events:       19 data:                0  pos:0 ino:3a4a sdev:f\n", never, true},
		{"stdin for output only", header +
			"tfd:        0 events:        4 data:                0  pos:0 ino:3a4a sdev:f\n", never, false},
		{"EPOLLRDNORM", header +
			"tfd:        0 events:       40 data:                0  pos:0 ino:3a4a sdev:f\n", never, true},
		{"sockets only", header +
			"tfd:       15 events:       19 data:                f  pos:0 ino:2bbf sdev:f\n" +
			"tfd:       20 events:        1 data:               14  pos:0 ino:5e1 sdev:8\n", never, false},
		{"the instance's own ino is not a target", "ino:\t3a4a\n", never, false},
		{"same inode, other device", header +
			"tfd:        0 events:       19 data:                0  pos:0 ino:3a4a sdev:10\n", never, false},
		{"old kernel, descriptor is stdin", header +
			"tfd:        7 events:        1 data:                0\n", func(fd int) bool { return fd == 7 }, true},
		{"old kernel, descriptor is not stdin", header +
			"tfd:        7 events:        1 data:                0\n", never, false},
		{"a malformed line before the match", header +
			"tfd: garbage\n" +
			"tfd:        0 events:       19 data:                0  pos:0 ino:3a4a sdev:f", never, true},
		{"empty", "", never, false},
	}
	for _, tt := range tests {
		if got := epollWatchesInput([]byte(tt.fdinfo), in, tt.isIn); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzParseEpollTarget: no line makes the parser panic, what it accepts
// has a valid descriptor, and a target printed back in the kernel's format
// parses to itself.
func FuzzParseEpollTarget(f *testing.F) {
	f.Add([]byte("tfd:        0 events:       19 data:                0  pos:0 ino:984774 sdev:fe00000"))
	f.Add([]byte("tfd:        3 events:        1 data:                0"))
	f.Add([]byte("tfd: 0 events: 1 ino:1 sdev:100000000"))
	f.Add([]byte("tfd:0 events:1 data:0 pos:0 ino:1 sdev:1"))
	f.Add([]byte("tfd: 0 events: 1 data:"))
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := parseEpollTarget(line)
		if !ok {
			if got != (epollTarget{}) {
				t.Fatalf("parseEpollTarget(%q): rejected but returned %+v", line, got)
			}
			return
		}
		if got.fd < 0 {
			t.Fatalf("parseEpollTarget(%q): descriptor %d", line, got.fd)
		}
		if !got.hasID {
			return
		}
		major, minor := unix.Major(got.id.dev), unix.Minor(got.id.dev)
		if major >= 1<<12 || minor >= 1<<20 {
			t.Fatalf("parseEpollTarget(%q): device %d:%d beyond the kernel's dev_t", line, major, minor)
		}
		again := fmt.Sprintf("tfd: %8d events: %8x data: %16x  pos:%d ino:%x sdev:%x",
			got.fd, got.events, 0, 0, got.id.ino, major<<20|minor)
		if back, ok := parseEpollTarget([]byte(again)); !ok || back != got {
			t.Fatalf("parseEpollTarget(%q) = %+v; printed back as %q it parses to %+v, %v", line, got, again, back, ok)
		}
	})
}
