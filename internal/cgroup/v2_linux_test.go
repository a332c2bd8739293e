package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentproc/agentproc/internal/errdefs"
)

// TestSetLimitsFiles runs setLimits against a directory laid out like a
// cgroup v2 parent and child (plain files, so it runs anywhere): it checks
// what is written where, including on hosts whose kernel offers none of
// the controllers and so cannot run the real tests.
func TestSetLimitsFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		limits      Limits
		controllers string // the parent's cgroup.controllers
		enabled     string // the parent's cgroup.subtree_control
		childFiles  []string
		wantEnable  string // written to subtree_control; "" if untouched
		want        map[string]string
		wantErr     string
	}{
		{
			name: "all", limits: Limits{Memory: 64 << 20, Procs: 64, CPU: 0.25},
			controllers: "cpuset cpu io memory pids", enabled: "cpu",
			childFiles: []string{"memory.swap.max", "memory.oom.group"},
			wantEnable: "+memory +pids",
			want: map[string]string{
				"memory.max": "67108864", "memory.swap.max": "0", "memory.oom.group": "1",
				"pids.max": "64", "cpu.max": "25000 100000",
			},
		},
		{
			name: "no swap accounting", limits: Limits{Memory: 1 << 30},
			controllers: "memory", enabled: "memory",
			want: map[string]string{"memory.max": "1073741824"},
		},
		{
			name: "tiny cpu", limits: Limits{CPU: 0.001},
			controllers: "cpu", enabled: "",
			wantEnable: "+cpu",
			want:       map[string]string{"cpu.max": "1000 100000"},
		},
		{
			name: "two cores and a half", limits: Limits{CPU: 2.5},
			controllers: "cpu", enabled: "cpu",
			want: map[string]string{"cpu.max": "250000 100000"},
		},
		{
			name: "missing controller", limits: Limits{Procs: 10},
			controllers: "hugetlb", enabled: "",
			wantErr: `Limits.Procs needs the pids controller`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			write := func(path, data string) {
				if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(filepath.Join(parent, "cgroup.controllers"), tt.controllers+"\n")
			write(filepath.Join(parent, "cgroup.subtree_control"), tt.enabled+"\n")
			child := filepath.Join(parent, "agentproc-x")
			if err := os.Mkdir(child, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range tt.childFiles {
				write(filepath.Join(child, f), "")
			}
			// The kernel provides the interface files of every enabled
			// controller; setLimits only writes them. Made here as they
			// would be, so the test does not depend on root reading a
			// file that the write created with mode 0.
			for f := range tt.want {
				write(filepath.Join(child, f), "")
			}
			g := &v2Dir{path: child, dirfd: -1}
			err := g.setLimits(tt.limits)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errdefs.ErrUnsupported) {
					t.Fatalf("got %v, want ErrUnsupported saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
			if tt.wantEnable != "" && string(got) != tt.wantEnable {
				t.Errorf("subtree_control: got %q, want %q written", got, tt.wantEnable)
			}
			if tt.wantEnable == "" && string(got) != tt.enabled+"\n" {
				t.Errorf("subtree_control: got %q, want it untouched", got)
			}
			for file, want := range tt.want {
				if got, err := os.ReadFile(filepath.Join(child, file)); err != nil || string(got) != want {
					t.Errorf("%s: got %q (%v), want %q", file, got, err, want)
				}
			}
			entries, _ := os.ReadDir(child)
			if len(entries) != len(tt.want) {
				t.Errorf("files in the cgroup: got %d, want %d (%v)", len(entries), len(tt.want), entries)
			}
		})
	}
}
