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
