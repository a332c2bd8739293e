package agentproc_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
	"github.com/google/uuid"
)

// TestLimitsNamedV1Parent names a parent in one cgroup v1 hierarchy, as
// runc's cgroupsPath does: the same relative path is used, and created,
// in every v1 hierarchy the limits need, and the tree's cgroups sit in it.
// It skips where no cgroup v1 pids hierarchy can be written.
func TestLimitsNamedV1Parent(t *testing.T) {
	t.Parallel()
	var pidsRoot, memRoot string
	for line := range strings.Lines(string(must(os.ReadFile("/proc/self/mountinfo")))) {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" || f[3] != "/" {
			continue
		}
		for _, c := range strings.Split(g[2], ",") {
			switch c {
			case "pids":
				pidsRoot = f[4]
			case "memory":
				memRoot = f[4]
			}
		}
	}
	if pidsRoot == "" || memRoot == "" {
		t.Skip("no cgroup v1 pids and memory hierarchies mounted at their roots")
	}
	rel := "agentproc-test-" + uuid.NewString()[:8]
	parent := filepath.Join(pidsRoot, rel)
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Skipf("cannot make a cgroup in %s: %v", pidsRoot, err)
	}
	memParent := filepath.Join(memRoot, rel)
	t.Cleanup(func() {
		// The library creates the named path in the other hierarchies and,
		// as runc does, leaves it: it is the operator's.
		for _, d := range []string{parent, memParent} {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove %s: %v", d, err)
			}
		}
	})
	m := newManager(t, agentproc.WithCgroup(parent))
	p := mustStart(t, m, agentproc.Request{
		Command: "echo ready; read x",
		Stdin:   true,
		Limits:  agentproc.Limits{Memory: 128 << 20, Procs: 10},
	})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	dirs := treeCgroups(t, p.Info().PID, p.ID())
	leaf := "agentproc-" + p.ID()
	if dirs["pids"] != filepath.Join(parent, leaf) || dirs["memory"] != filepath.Join(memParent, leaf) {
		t.Errorf("cgroups: got %v, want pids and memory under %s", dirs, rel)
	}
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(parent, leaf, "pids.max"))))); got != "10" {
		t.Errorf("pids.max: got %q, want 10", got)
	}
	if _, err := p.WriteStdin(testContext(t), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	mustWait(t, p)
	requireRemoved(t, dirs)
}

// TestLimitsWithSandbox: a sandboxed start and cgroup v1 thread placement
// share one locked thread (startCommand): the shell is confined and born in
// the tree's cgroups, with the process limit lowered to the limit after
// the placement, which wrote through descriptors opened before Landlock.
func TestLimitsWithSandbox(t *testing.T) {
	requireSandbox(t)
	ws, _, _ := sandboxWorkspace(t)
	m := newManager(t, agentproc.WithSandbox(agentproc.WorkspaceSandbox(ws)))
	p := startDefault(t, m, agentproc.Request{
		WorkDir: ws,
		Command: "echo ready; read x",
		Stdin:   true,
		Limits:  agentproc.Limits{Memory: 128 << 20, Procs: 10},
	})
	waitForOutput(t, p, regexp.MustCompile(`ready`))
	dirs := treeCgroups(t, p.Info().PID, p.ID())
	pidsDir := dirs["pids"]
	if pidsDir == "" {
		pidsDir = dirs["v2"]
	}
	if pidsDir == "" {
		t.Fatalf("the sandboxed shell is in no pids cgroup of its own: %v", dirs)
	}
	if got := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(pidsDir, "pids.max"))))); got != "10" {
		t.Errorf("pids.max: got %q, want 10", got)
	}
	if _, err := p.WriteStdin(testContext(t), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if info := mustWait(t, p); info.Sandbox == nil {
		t.Errorf("Info.Sandbox: got nil, want the sandbox reported")
	}
	requireRemoved(t, dirs)
}
