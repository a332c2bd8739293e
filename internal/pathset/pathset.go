// Package pathset answers, for a list of clean absolute paths (a policy's
// hidden paths), whether another path lies within one of them or above
// one, in map lookups bounded by that path's depth, not by the list's
// length. The sandbox asked each question by comparing the path with
// every entry of the list, at every directory entry the Landlock grants
// visit and at every link the hidden-link walk finds: quadratic in a
// long Hide list (1,024 paths, the cap, cost the host about half a
// second of CPU for one policy; fifth mend).
package pathset

// Set is a set of clean absolute paths ("/" included). The zero value is
// an empty set; use New to fill one. A Set is not safe for concurrent
// use: it counts its lookups.
type Set struct {
	in    map[string]struct{} // the paths
	above map[string]struct{} // every proper ancestor of one of them
	// probes counts map lookups, for tests that bound the cost by
	// counting rather than timing.
	probes int
}

// New returns the set of paths; each must be clean and absolute.
func New(paths []string) *Set {
	s := &Set{in: make(map[string]struct{}, len(paths)), above: map[string]struct{}{}}
	for _, p := range paths {
		s.in[p] = struct{}{}
		for d := parent(p); d != ""; d = parent(d) {
			if _, ok := s.above[d]; ok {
				break // its ancestors are there already
			}
			s.above[d] = struct{}{}
		}
	}
	return s
}

// Covers reports whether p is one of the set's paths or lies below one.
func (s *Set) Covers(p string) bool {
	for d := p; d != ""; d = parent(d) {
		s.probes++
		if _, ok := s.in[d]; ok {
			return true
		}
	}
	return false
}

// Above reports whether one of the set's paths lies strictly below p.
func (s *Set) Above(p string) bool {
	s.probes++
	_, ok := s.above[p]
	return ok
}

// Len is the number of paths in the set.
func (s *Set) Len() int { return len(s.in) }

// Probes is the number of map lookups Covers and Above have made.
func (s *Set) Probes() int { return s.probes }

// parent is the directory above the clean absolute path p, "" above "/".
func parent(p string) string {
	if p == "/" || p == "" {
		return ""
	}
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}
