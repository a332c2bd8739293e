package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentproc/agentproc/internal/errdefs"
)

// TestPlan decides where the cgroups of a request go on made-up hosts
// (directories standing in for mounts), including those this machine is
// not: a pure v2 host, one with no usable controller, a delegated v2
// cgroup that holds the host.
func TestPlan(t *testing.T) {
	t.Parallel()
	type hostSpec struct {
		v2Controllers string            // the host's own v2 cgroup's cgroup.controllers; "-" for no v2 mount
		v2Enabled     string            // its cgroup.subtree_control
		ownV2         string            // the host's v2 cgroup path
		ownProcs      string            // its cgroup.procs (the host is PID 1)
		top           string            // the top's cgroup.controllers when ownV2 is not "/"
		topEnabled    string            // the top's cgroup.subtree_control
		topProcs      string            // the top's cgroup.procs
		topNotRoot    bool              // the top is a cgroup namespace's root, not the hierarchy's
		notRoot       bool              // the host does not run as root
		v1            map[string]string // controller ("cpu,cpuacct") -> the host's path in that hierarchy
	}
	tests := []struct {
		name    string
		host    hostSpec
		spec    Spec
		wantV2  string // v2Parent relative to the v2 mount; "" for none
		wantOpt bool
		wantMov bool
		wantV2L Limits
		wantV1  []string // parents relative to the test root
		wantV1L Limits
		wantErr []string
		notErr  []string
	}{
		{
			name: "hybrid, as root",
			host: hostSpec{v2Controllers: "hugetlb", ownV2: "/", v1: map[string]string{
				"memory": "/process_api/x", "pids": "/", "cpu": "/", "cpuacct": "/"}},
			spec:   Spec{ID: "1", Limits: Limits{Memory: 64 << 20, Procs: 64, CPU: 0.25}},
			wantV2: "/", wantOpt: true,
			wantV1:  []string{"memory/process_api/x", "pids", "cpu"},
			wantV1L: Limits{Memory: 64 << 20, Procs: 64, CPU: 0.25},
		},
		{
			name:   "pure v1 gets cpuacct for the CPU time",
			host:   hostSpec{v2Controllers: "-", v1: map[string]string{"pids": "/a", "cpuacct": "/a"}},
			spec:   Spec{ID: "1", Limits: Limits{Procs: 10}},
			wantV1: []string{"pids/a", "cpuacct/a"}, wantV1L: Limits{Procs: 10},
		},
		{
			name:   "pure v2, root cgroup",
			host:   hostSpec{v2Controllers: "cpu memory pids", ownV2: "/"},
			spec:   Spec{ID: "1", Limits: Limits{Memory: 1 << 30, Procs: 5}},
			wantV2: "/", wantV2L: Limits{Memory: 1 << 30, Procs: 5},
		},
		{
			name:   "pure v2, delegated cgroup already passing the controllers",
			host:   hostSpec{v2Controllers: "cpu memory pids", v2Enabled: "memory pids", ownV2: "/user.slice/app"},
			spec:   Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantV2: "/user.slice/app", wantV2L: Limits{Procs: 5},
		},
		{
			name:   "pure v2, occupied cgroup that holds the host alone: the host moves",
			host:   hostSpec{v2Controllers: "cpu memory pids", ownV2: "/user.slice/app", ownProcs: "1\n"},
			spec:   Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantV2: "/user.slice/app", wantMov: true, wantV2L: Limits{Procs: 5},
		},
		{
			name:    "pure v2, cgroup that holds another process, not root",
			host:    hostSpec{v2Controllers: "cpu memory pids", ownV2: "/user.slice/app", ownProcs: "1\n7\n", notRoot: true},
			spec:    Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantErr: []string{"Limits.Procs", "holds process 7 besides the host", "systemd-run", "WithCgroup"},
			notErr:  []string{"as root"},
		},
		{
			name:   "pure v2, cgroup that holds another process, as root: the top",
			host:   hostSpec{v2Controllers: "cpu memory pids", ownV2: "/system.slice/agent", ownProcs: "1\n7\n", top: "cpu memory pids"},
			spec:   Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantV2: "/", wantV2L: Limits{Procs: 5},
		},
		{
			name:   "pure v2, cgroup offering only memory, as root: the top for pids, the own cgroup for memory",
			host:   hostSpec{v2Controllers: "memory", ownV2: "/system.slice/agent", ownProcs: "1\n", top: "cpu memory pids"},
			spec:   Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantV2: "/", wantV2L: Limits{Procs: 5},
		},
		{
			name:   "pure v2, cgroup offering only memory, memory limit: the host moves",
			host:   hostSpec{v2Controllers: "memory", ownV2: "/system.slice/agent", ownProcs: "1\n", top: "cpu memory pids"},
			spec:   Spec{ID: "1", Limits: Limits{Memory: 64 << 20}},
			wantV2: "/system.slice/agent", wantMov: true, wantV2L: Limits{Memory: 64 << 20},
		},
		{
			name:    "pure v2, cgroup offering only memory, not root",
			host:    hostSpec{v2Controllers: "memory", ownV2: "/user.slice/app", ownProcs: "1\n", top: "cpu memory pids", notRoot: true},
			spec:    Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantErr: []string{"Limits.Procs", "lacks pids", `lists "memory"`, "systemd-run", "WithCgroup"},
			notErr:  []string{"as root"},
		},
		{
			// Step 4 for a root host whose steps 1-3 all fail: each is
			// named, and the one step is for the cgroup above, never to
			// run as root.
			name: "container: cgroup that holds another process, the namespace's root lacking pids, as root",
			host: hostSpec{v2Controllers: "cpu memory pids", ownV2: "/agent", ownProcs: "1\n7\n",
				top: "memory", topNotRoot: true},
			spec: Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantErr: []string{"Limits.Procs", "the host's cgroup", "holds process 7 besides the host",
				"the top of the hierarchy", "lacks pids too", "enable pids in its cgroup.subtree_control"},
			notErr: []string{"as root", "systemd-run"},
		},
		{
			name: "container: cgroup lacking pids, the namespace's root holding processes, as root",
			host: hostSpec{v2Controllers: "memory", ownV2: "/agent", ownProcs: "1\n",
				top: "cpu memory pids", topProcs: "9\n", topNotRoot: true},
			spec: Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantErr: []string{"Limits.Procs", "the host's cgroup", "lacks pids", `lists "memory"`,
				"the top of the hierarchy", "holds processes", "move the processes of"},
			notErr: []string{"as root", "systemd-run"},
		},
		{
			name: "container: cgroup lacking pids, the namespace's root empty, as root: the top",
			host: hostSpec{v2Controllers: "memory", ownV2: "/agent", ownProcs: "1\n",
				top: "cpu memory pids", topNotRoot: true},
			spec:   Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantV2: "/", wantV2L: Limits{Procs: 5},
		},
		{
			name:    "container: namespace root offering only memory, as root",
			host:    hostSpec{v2Controllers: "memory", ownV2: "/", ownProcs: "1\n", top: "-"},
			spec:    Spec{ID: "1", Limits: Limits{Procs: 5}},
			wantErr: []string{"Limits.Procs", "lacks pids", "enable pids in its cgroup.subtree_control"},
			notErr:  []string{"as root"},
		},
		{
			name:   "container: namespace root holding the host alone, as root: the host moves",
			host:   hostSpec{v2Controllers: "cpu memory pids", ownV2: "/", ownProcs: "1\n", top: "-"},
			spec:   Spec{ID: "1", Limits: Limits{Procs: 5, CPU: 1}},
			wantV2: "/", wantMov: true, wantV2L: Limits{Procs: 5, CPU: 1},
		},
		{
			name:    "no controller anywhere",
			host:    hostSpec{v2Controllers: "hugetlb", ownV2: "/"},
			spec:    Spec{ID: "1", Limits: Limits{Memory: 64 << 20}},
			wantErr: []string{"Limits.Memory", "memory", `lists "hugetlb"`, "WithCgroup"},
			notErr:  []string{"as root"},
		},
		{
			name:    "no cgroup mounted",
			host:    hostSpec{v2Controllers: "-"},
			spec:    Spec{ID: "1", Limits: Limits{CPU: 1}},
			wantErr: []string{"Limits.CPU", "no cgroup v2 hierarchy is mounted", "WithCgroup"},
			notErr:  []string{"as root", "systemd-run"},
		},
		{
			name:    "no cgroup mounted, not root",
			host:    hostSpec{v2Controllers: "-", notRoot: true},
			spec:    Spec{ID: "1", Limits: Limits{CPU: 1}},
			wantErr: []string{"Limits.CPU", "no cgroup v2 hierarchy is mounted", "systemd-run --user", "WithCgroup"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			h := host{own: membership{v1: map[string]string{}}, self: 1, root: !tt.host.notRoot}
			v2point := filepath.Join(root, "unified")
			if tt.host.v2Controllers != "-" {
				h.mounts = append(h.mounts, mount{point: v2point, root: "/", v2: true})
				h.own.v2, h.own.hasV2 = tt.host.ownV2, true
				dir := filepath.Join(v2point, tt.host.ownV2)
				mustWrite(t, filepath.Join(dir, "cgroup.controllers"), tt.host.v2Controllers)
				mustWrite(t, filepath.Join(dir, "cgroup.subtree_control"), tt.host.v2Enabled)
				mustWrite(t, filepath.Join(dir, "cgroup.procs"), tt.host.ownProcs)
				if tt.host.ownV2 != "/" || tt.host.top == "-" {
					// Not the root cgroup: a cgroup namespace's root
					// ("-": the top is the own cgroup) or a cgroup below.
					mustWrite(t, filepath.Join(dir, "cgroup.type"), "domain")
				}
				if tt.host.top != "" && tt.host.top != "-" {
					mustWrite(t, filepath.Join(v2point, "cgroup.controllers"), tt.host.top)
					mustWrite(t, filepath.Join(v2point, "cgroup.subtree_control"), tt.host.topEnabled)
					mustWrite(t, filepath.Join(v2point, "cgroup.procs"), tt.host.topProcs)
					if tt.host.topNotRoot {
						mustWrite(t, filepath.Join(v2point, "cgroup.type"), "domain")
					}
				}
			}
			for ctls, path := range tt.host.v1 {
				m := mount{point: filepath.Join(root, strings.ReplaceAll(ctls, ",", "_")), root: "/", controllers: strings.Split(ctls, ",")}
				h.mounts = append(h.mounts, m)
				for _, c := range m.controllers {
					h.own.v1[c] = path
				}
				if err := os.MkdirAll(filepath.Join(m.point, path), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			p, err := plan(h, tt.spec)
			if len(tt.wantErr) > 0 {
				if err == nil || !errors.Is(err, errdefs.ErrUnsupported) {
					t.Fatalf("got %+v, %v; want ErrUnsupported", p, err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q: want it to say %q", err, w)
					}
				}
				for _, w := range tt.notErr {
					if strings.Contains(err.Error(), w) {
						t.Errorf("error %q: want it not to say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantV2 := ""
			if tt.wantV2 != "" {
				wantV2 = filepath.Join(v2point, tt.wantV2)
			}
			if p.v2Parent != wantV2 || p.v2Optional != tt.wantOpt || p.moveHost != tt.wantMov || p.v2Limits != tt.wantV2L {
				t.Errorf("v2: got %q optional %v move %v limits %+v, want %q optional %v move %v limits %+v",
					p.v2Parent, p.v2Optional, p.moveHost, p.v2Limits, wantV2, tt.wantOpt, tt.wantMov, tt.wantV2L)
			}
			var gotV1 []string
			for _, v := range p.v1 {
				rel, _ := filepath.Rel(root, v.parent)
				gotV1 = append(gotV1, rel)
			}
			if strings.Join(gotV1, " ") != strings.Join(tt.wantV1, " ") || p.v1Limits != tt.wantV1L {
				t.Errorf("v1: got %v limits %+v, want %v limits %+v", gotV1, p.v1Limits, tt.wantV1, tt.wantV1L)
			}
		})
	}
}

func mustWrite(t *testing.T, file, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadMembership parses /proc/PID/cgroup on a hybrid host.
func TestReadMembership(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "cgroup")
	mustWrite(t, file, "9:name=systemd:/\n4:memory:/process_api/x\n2:cpu,cpuacct:/a\n0::/\n")
	ms := readMembership(file)
	if ms.v1["memory"] != "/process_api/x" || ms.v1["cpu"] != "/a" || ms.v1["cpuacct"] != "/a" || !ms.hasV2 || ms.v2 != "/" {
		t.Errorf("got %+v", ms)
	}
}

// TestDirOf maps cgroup paths onto mounts of a subtree (as in a container).
func TestDirOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		m    mount
		path string
		want string
	}{
		{mount{point: "/sys/fs/cgroup/memory", root: "/"}, "/a/b", "/sys/fs/cgroup/memory/a/b"},
		{mount{point: "/sys/fs/cgroup/memory", root: "/"}, "/", "/sys/fs/cgroup/memory"},
		{mount{point: "/sys/fs/cgroup", root: "/docker/x"}, "/docker/x/y", "/sys/fs/cgroup/y"},
		{mount{point: "/sys/fs/cgroup", root: "/docker/x"}, "/docker/xy", ""},
		{mount{point: "/sys/fs/cgroup", root: "/docker/x"}, "/other", ""},
	} {
		if got := tt.m.dirOf(tt.path); got != tt.want {
			t.Errorf("%+v.dirOf(%q): got %q, want %q", tt.m, tt.path, got, tt.want)
		}
	}
}
