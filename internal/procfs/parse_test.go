package procfs

import "testing"

// TestParseStat reads state, process group and start time after the
// command name's last ')', whatever the name holds, and refuses a line cut
// short.
func TestParseStat(t *testing.T) {
	t.Parallel()
	// Fields 3 (state) to 22 (starttime) after the name.
	rest := " S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	for _, tt := range []struct {
		name, data       string
		state            byte
		pgrp             int
		start            uint64
		groupOK, startOK bool
	}{
		{"plain", "17 (sh)" + rest, 'S', 4242, 987654, true, true},
		{"spaces and parens", "17 (a) b (c))" + rest, 'S', 4242, 987654, true, true},
		{"no start time", "17 (sh) S 1 4242 4242", 'S', 4242, 0, true, false},
		{"no name", "17 sh" + rest, 0, 0, 0, false, false},
		{"cut short", "17 (sh) S 1", 0, 0, 0, false, false},
		{"long state", "17 (sh) SS 1 4242", 0, 0, 0, false, false},
	} {
		state, pgrp, ok := ParseStat([]byte(tt.data))
		if ok != tt.groupOK || (ok && (state != tt.state || pgrp != tt.pgrp)) {
			t.Errorf("%s: ParseStat got %q %d %v, want %q %d %v", tt.name, state, pgrp, ok, tt.state, tt.pgrp, tt.groupOK)
		}
		start, state, ok := ParseStatStart([]byte(tt.data))
		if ok != tt.startOK || (ok && (start != tt.start || state != tt.state)) {
			t.Errorf("%s: ParseStatStart got %d %q %v, want %d %q %v", tt.name, start, state, ok, tt.start, tt.state, tt.startOK)
		}
	}
}

// TestParseMountinfo reads the fields both users take (the sandbox's
// read-only mounts, cgroup's hierarchies), unescapes paths, and skips
// lines without the separator or cut short.
func TestParseMountinfo(t *testing.T) {
	t.Parallel()
	data := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /sys/fs/cgroup ro,nosuid,nodev master:9 - cgroup2 cgroup2 rw,nsdelegate
31 22 0:27 /sub /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
40 22 0:30 / /mnt/a\040b ro - tmpfs
41 22 0:31 / /cut rw
42 22 0:32 /
`
	var got []Mount
	ParseMountinfo([]byte(data), func(m Mount) { got = append(got, m) })
	want := []Mount{
		{Root: "/", Point: "/", Options: "rw,relatime", FSType: "ext4", Super: "rw"},
		{Root: "/", Point: "/sys/fs/cgroup", Options: "ro,nosuid,nodev", FSType: "cgroup2", Super: "rw,nsdelegate"},
		{Root: "/sub", Point: "/sys/fs/cgroup/cpu,cpuacct", Options: "rw", FSType: "cgroup", Super: "rw,cpu,cpuacct"},
		{Root: "/", Point: "/mnt/a b", Options: "ro", FSType: "tmpfs"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mount %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for i, ro := range []bool{false, true, false, true} {
		if got[i].ReadOnly() != ro {
			t.Errorf("mount %d (%s): got ReadOnly %v, want %v", i, got[i].Options, !ro, ro)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`/plain`:              "/plain",
		`/a\040b`:             "/a b",
		`/tab\011x\134y`:      "/tab\tx\\y",
		`/short\04`:           `/short\04`,
		`/not\09octal\040end`: "/not\\09octal end",
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q): got %q, want %q", in, got, want)
		}
	}
}
