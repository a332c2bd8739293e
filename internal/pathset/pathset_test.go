package pathset

import (
	"strconv"
	"strings"
	"testing"
)

// TestSet checks Covers and Above against the comparison they replace,
// the root among the paths too.
func TestSet(t *testing.T) {
	t.Parallel()
	within := func(p, dir string) bool {
		if dir == "/" {
			return strings.HasPrefix(p, "/")
		}
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	lists := [][]string{
		{"/home/u/.ssh", "/home/u/.aws/credentials", "/etc/shadow"},
		{"/"},
		{},
	}
	probes := []string{"/", "/home", "/home/u", "/home/u/.ssh", "/home/u/.ssh/id", "/home/u/.sshx", "/home/u/.aws",
		"/home/u/.aws/credentials", "/home/u/.aws/config", "/etc", "/etc/shadow-", "/etc/shadow", "/var"}
	for _, list := range lists {
		s := New(list)
		for _, p := range probes {
			var covers, above bool
			for _, h := range list {
				covers = covers || within(p, h)
				above = above || (h != p && within(h, p))
			}
			if got := s.Covers(p); got != covers {
				t.Errorf("%q: Covers(%q) = %v, want %v", list, p, got, covers)
			}
			if got := s.Above(p); got != above {
				t.Errorf("%q: Above(%q) = %v, want %v", list, p, got, above)
			}
		}
	}
}

// TestSetCostByDepth checks that a lookup's cost is the path's depth,
// whatever the set's size: 1,024 paths cost a lookup no more than 8 do.
func TestSetCostByDepth(t *testing.T) {
	t.Parallel()
	cost := func(n int) int {
		paths := make([]string, n)
		for i := range paths {
			paths[i] = "/home/u/h" + strconv.Itoa(i)
		}
		s := New(paths)
		for i := range 100 {
			s.Covers("/home/u/other" + strconv.Itoa(i) + "/a/b")
			s.Above("/home/u/other" + strconv.Itoa(i))
		}
		return s.Probes()
	}
	if small, large := cost(8), cost(1024); small != large || small != 100*(6+1) {
		t.Errorf("probes for 100 lookups: got %d with 8 paths and %d with 1,024, want %d for both", small, large, 100*(6+1))
	}
}
