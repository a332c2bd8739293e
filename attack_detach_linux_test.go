package agentproc_test

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestAttackDetachedRunnerEnvironment: a detached process's runner is the
// host's binary, unconfined (it confines only the shell it starts), and
// it used to run with the tree's environment, Request.Env included: a
// dynamic loader variable there (LD_PRELOAD of a library the tree wrote in
// its workspace) ran code in the runner, outside the sandbox. The runner
// now runs with its own variables and PATH only, and hands the tree's on
// to the shell. The control shows the library writes outside when loaded
// unconfined; the shell, which still gets LD_PRELOAD, runs it confined.
func TestAttackDetachedRunnerEnvironment(t *testing.T) {
	requireSandbox(t)
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed")
	}
	if f, err := elf.Open("/proc/self/exe"); err != nil {
		t.Skip(err)
	} else {
		dynamic := false
		for _, p := range f.Progs {
			dynamic = dynamic || p.Type == elf.PT_INTERP
		}
		_ = f.Close()
		if !dynamic {
			t.Skip("the test binary is linked statically (no cgo): the loader reads no LD_PRELOAD for it")
		}
	}
	ws, _, _ := sandboxWorkspace(t)
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o777); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(outside, "ran-unconfined")
	src := filepath.Join(ws, "evil.c")
	lib := filepath.Join(ws, "evil.so")
	code := `#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void run(void) {
	int fd = open("` + mark + `", O_WRONLY|O_CREAT|O_APPEND, 0644);
	if (fd >= 0) { write(fd, "x", 1); close(fd); }
}
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v %s", err, out)
	}
	state := t.TempDir()
	m := newManager(t, agentproc.WithStateDir(state))
	env := map[string]string{"LD_PRELOAD": lib}
	// Control: loaded unconfined, the library writes outside.
	mustWait(t, mustStart(t, m, agentproc.Request{Command: "true", WorkDir: ws, Env: env}))
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("control: got %v, want the library to have written %s", err, mark)
	}
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	p := mustStart(t, m, agentproc.Request{Command: "true", WorkDir: ws, Env: env, Detach: true,
		Sandbox: agentproc.WorkspaceSandbox(ws)})
	mustWait(t, p)
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("detached sandboxed Start with LD_PRELOAD: the library ran outside the sandbox (%v), want it confined", err)
	}
}
