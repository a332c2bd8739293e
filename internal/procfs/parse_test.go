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

// TestParseStatEnv reads the kernel-thread flag (field 9) and whether
// env_end (field 51) is set, from lines as Linux 6 prints them.
func TestParseStatEnv(t *testing.T) {
	t.Parallel()
	const (
		mid  = " 20 0 1 0 3567347 3133440 380 18446744073709551615 93932373712896 93932373732777 140733345350992 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 93932373748784 93932373750400 93932955525120"
		args = " 140733345352371 140733345352391 140733345352391"
	)
	for _, tt := range []struct {
		name, data            string
		state                 byte
		kernel, envSet, valid bool
	}{
		{"process", "17221 (cat) R 17219 17219 15843 0 -1 4194304 100 0 0 0 0 0 0 0" + mid + args + " 140733345353707 0", 'R', false, true, true},
		{"empty environment", "17221 (env) S 1 1 1 0 -1 4194304 100 0 0 0 0 0 0 0" + mid + args + " 140733345352391 0", 'S', false, true, true},
		{"mid-exec", "17221 (sh) R 1 1 1 0 -1 4194304 100 0 0 0 0 0 0 0" + mid + " 0 0 0 0 0", 'R', false, false, true},
		{"kernel thread", "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 5 0 0 20 0 1 0 14 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0", 'S', true, false, true},
		{"zombie", "9 (a) b) Z 1 9 9 0 -1 4194308 0 0 0 0 0 0 0 0" + mid + " 0 0 0 0 0", 'Z', false, false, true},
		{"before 3.5", "17 (sh) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10", 0, false, false, false},
		{"flags not a number", "17 (sh) S 1 1 1 0 -1 x 100 0 0 0 0 0 0 0" + mid + args + " 1 0", 0, false, false, false},
	} {
		state, kernel, envSet, ok := ParseStatEnv([]byte(tt.data))
		if ok != tt.valid || state != tt.state || kernel != tt.kernel || envSet != tt.envSet {
			t.Errorf("%s: got %q %v %v %v, want %q %v %v %v", tt.name, state, kernel, envSet, ok, tt.state, tt.kernel, tt.envSet, tt.valid)
		}
	}
}

// TestParseMountinfo reads the fields its users take (the sandbox's
// read-only mounts and hidden paths' other names, a FUSE view's source,
// cgroup's hierarchies),
// unescapes paths, and skips
// lines without the separator or cut short.
func TestParseMountinfo(t *testing.T) {
	t.Parallel()
	data := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /sys/fs/cgroup ro,nosuid,nodev master:9 - cgroup2 cgroup2 rw,nsdelegate
31 22 0:27 /sub /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
40 22 0:30 / /mnt/a\040b ro - tmpfs
41 22 0:31 / /cut rw
42 22 0:32 /
43 22 0:33 / /home rw - fuse /data/my\040home rw,user_id=0
`
	var got []Mount
	ParseMountinfo([]byte(data), func(m Mount) { got = append(got, m) })
	want := []Mount{
		{Dev: "8:1", Root: "/", Point: "/", Options: "rw,relatime", FSType: "ext4", Source: "/dev/sda1", Super: "rw"},
		{Dev: "0:26", Root: "/", Point: "/sys/fs/cgroup", Options: "ro,nosuid,nodev", FSType: "cgroup2", Source: "cgroup2", Super: "rw,nsdelegate"},
		{Dev: "0:27", Root: "/sub", Point: "/sys/fs/cgroup/cpu,cpuacct", Options: "rw", FSType: "cgroup", Source: "cgroup", Super: "rw,cpu,cpuacct"},
		{Dev: "0:30", Root: "/", Point: "/mnt/a b", Options: "ro", FSType: "tmpfs"},
		{Dev: "0:33", Root: "/", Point: "/home", Options: "rw", FSType: "fuse", Source: "/data/my home", Super: "rw,user_id=0"},
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
