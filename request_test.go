package agentproc_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestValidateOrder checks that Start checks a request in the order
// request.go documents: a request wrong in two ways reports the earlier
// check, for every pair of checks, and nothing starts.
func TestValidateOrder(t *testing.T) {
	t.Parallel()
	m := newManager(t) // no state dir, so Detach is refused
	missing := filepath.Join(os.TempDir(), "agentproc-no-such-dir-"+strconv.Itoa(os.Getpid()))
	type step struct {
		name    string
		command bool // sets Command, so cannot be paired with another that does
		set     func(*agentproc.Request)
		mention string
	}
	steps := []step{
		{"command", true, func(r *agentproc.Request) { r.Command = " " }, "empty command"},
	}
	if runtime.GOOS == "windows" {
		// cmd.exe runs only the first line (checkShellCommand).
		steps = append(steps, step{"shell command", true, func(r *agentproc.Request) { r.Command = "echo a\necho b" }, "first line"})
	}
	steps = append(steps,
		step{"env", false, func(r *agentproc.Request) { r.Env = map[string]string{"": "x"} }, "empty key"},
		step{"timeout", false, func(r *agentproc.Request) { r.Timeout = -1 }, "negative timeout"},
		step{"ready", false, func(r *agentproc.Request) { r.Ready = &agentproc.ReadyCheck{Port: -1} }, "ready port"},
		step{"guards", false, func(r *agentproc.Request) { r.MaxOutput = -1 }, "negative MaxOutput"},
		step{"limits", false, func(r *agentproc.Request) { r.Limits.Memory = -1 }, "Limits.Memory"},
		step{"detach", false, func(r *agentproc.Request) { r.Detach = true }, "detach"},
		step{"sandbox", false, func(r *agentproc.Request) { r.Sandbox = &agentproc.Sandbox{Network: "bogus"} }, "Sandbox.Network"},
		step{"work dir", false, func(r *agentproc.Request) { r.WorkDir = missing }, strconv.Quote(missing)},
	)
	if runtime.GOOS == "windows" {
		steps = append(steps, step{"tty", false, func(r *agentproc.Request) { r.TTY = &agentproc.TTYSize{} }, "TTY on windows"})
	}
	for i, a := range steps {
		for _, b := range steps[i+1:] {
			if a.command && b.command {
				continue
			}
			t.Run(a.name+" before "+b.name, func(t *testing.T) {
				req := agentproc.Request{Command: "echo hi"}
				a.set(&req)
				b.set(&req)
				p, err := m.Start(t.Context(), req)
				if !errors.Is(err, agentproc.ErrInvalidRequest) && !errors.Is(err, agentproc.ErrUnsupported) {
					t.Fatalf("Start: got (%v, %v), want ErrInvalidRequest or ErrUnsupported", p, err)
				}
				if !strings.Contains(err.Error(), a.mention) {
					t.Errorf("error got %q, want the %s check's, mentioning %q", err, a.name, a.mention)
				}
			})
		}
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List after invalid starts: got %d processes, want 0", len(got))
	}
}
