package procfs

import "testing"

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		stat  string
		nanos int64
		state byte
		ok    bool
	}{
		// utime 150, stime 50, cutime 20, cstime 30 ticks: 2.5 s.
		{"busy", "42 (a b) c) R 1 42 42 0 -1 4194560 100 0 0 0 150 50 20 30 20 0 1 0 5000 100 10", 2_500_000_000, 'R', true},
		{"zombie", "7 (sh) Z 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0", 30_000_000, 'Z', true},
		{"short", "7 (sh) S 1 7 7 0 -1 0 0 0 0 0 1 2", 0, 0, false},
		{"negative", "7 (sh) S 1 7 7 0 -1 0 0 0 0 0 1 2 -1 0 20", 0, 0, false},
		{"huge", "7 (sh) S 1 7 7 0 -1 0 0 0 0 0 2305843009213693951 0 0 0 20", 0, 0, false},
		{"no name", "7 sh S", 0, 0, false},
	} {
		nanos, state, ok := ParseStatCPU([]byte(tt.stat))
		if nanos != tt.nanos || state != tt.state || ok != tt.ok {
			t.Errorf("%s: got %d, %q, %v; want %d, %q, %v", tt.name, nanos, state, ok, tt.nanos, tt.state, tt.ok)
		}
	}
}

func TestParseStatmResident(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		statm string
		pages int64
		ok    bool
	}{
		{"2000 512 100 10 0 300 0\n", 512, true},
		{"2000", 0, false},
		{"2000 -3 1", 0, false},
		{"", 0, false},
	} {
		pages, ok := ParseStatmResident([]byte(tt.statm))
		if pages != tt.pages || ok != tt.ok {
			t.Errorf("%q: got %d, %v; want %d, %v", tt.statm, pages, ok, tt.pages, tt.ok)
		}
	}
}
