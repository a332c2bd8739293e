package cgroup

import "path/filepath"

// Memory returns the memory charged to the tree now: v2 memory.current,
// else v1 memory.usage_in_bytes. Both count what the kernel charges the
// cgroup (anonymous memory, page cache its members read or wrote, kernel
// memory on their behalf), not only resident pages. ok is false where no
// memory controller counts for the tree.
func (g *Group) Memory() (int64, bool) {
	if g.v2 != nil {
		if v, ok := readInt(filepath.Join(g.v2.path, "memory.current")); ok {
			return v, true
		}
	}
	if g.v1 != nil && g.v1.mem != "" {
		return readInt(filepath.Join(g.v1.mem, "memory.usage_in_bytes"))
	}
	return 0, false
}
