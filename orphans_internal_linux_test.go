package agentproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentproc/agentproc/internal/cgroup"
)

// TestOrphanCgroupOnlyOurs: a record's cgroup is trusted with a kill and
// a removal only where this package could have made it: directly under the
// host's own cgroup (or the top, or the Manager's WithCgroup parent),
// owned by this user, never the host's own. Real cgroups in the first
// writable hierarchy that shows this process's cgroup stand in for what a
// record may name; before the check any agentproc-<UUID> directory on a
// cgroup file system was taken.
func TestOrphanCgroupOnlyOurs(t *testing.T) {
	t.Parallel()
	own := ownWritableCgroup(t)
	mk := func(dir string) string {
		t.Helper()
		if err := makeTestCgroup(t, dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	id := uuid.NewString()
	nest := mk(filepath.Join(own, "agentproc-test-nest-"+uuid.NewString()[:8]))
	direct := mk(filepath.Join(own, cgroup.LeafName(id)))
	idNested := uuid.NewString()
	nested := mk(filepath.Join(nest, cgroup.LeafName(idNested)))
	idOther := uuid.NewString()
	other := mk(filepath.Join(own, cgroup.LeafName(idOther)))
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		tree orphanTree
		want bool
	}{
		{"directly under the host's own cgroup", orphanTree{id: id, cgroup: direct}, true},
		{"nested where no parent of ours is", orphanTree{id: idNested, cgroup: nested}, false},
		{"nested under the Manager's WithCgroup parent", orphanTree{id: idNested, cgroup: nested, parent: nest}, true},
		{"owned by another user", orphanTree{id: idOther, cgroup: other}, false},
		{"a name that is no UUID", orphanTree{id: "x", cgroup: filepath.Join(own, "agentproc-x")}, false},
		{"listed by the live host that made it", orphanTree{id: idNested, cgroup: nested, fromHost: true}, true},
	} {
		g := orphanCgroup(tt.tree)
		if got := g != nil; got != tt.want {
			t.Errorf("%s (%s): got accepted %v, want %v", tt.name, tt.tree.cgroup, got, tt.want)
		}
	}
}

// ownWritableCgroup returns the directory of this process's own cgroup in
// the first hierarchy (v2, then the v1 pids one) where it may make
// children, or skips.
func ownWritableCgroup(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes cgroups and chowns one")
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 {
			paths[parts[1]] = parts[2]
		}
	}
	for _, c := range []struct{ key, mount string }{{"", "/sys/fs/cgroup"}, {"", "/sys/fs/cgroup/unified"}, {"pids", "/sys/fs/cgroup/pids"}} {
		p, ok := paths[c.key]
		if !ok {
			continue
		}
		dir := filepath.Join(c.mount, p)
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			return dir
		}
	}
	t.Skip("no cgroup hierarchy shows this process's cgroup at /sys/fs/cgroup")
	return ""
}
