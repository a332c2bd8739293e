//go:build unix

package agentproc_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

func skipWithoutPorts(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("listening ports are read from /proc on Linux only, this is %s", runtime.GOOS)
	}
}

// TestWaitPortOwnTreeOnly starts a server helper while this test process
// itself squats on another port: WaitPort and Ports see the helper's port
// and never the squatter's, which belongs to a process outside the tree.
func TestWaitPortOwnTreeOnly(t *testing.T) {
	t.Parallel()
	skipWithoutPorts(t)
	squatter, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	squatPort := squatter.Addr().(*net.TCPAddr).Port

	m := newManager(t)
	p := mustStart(t, m, helperRequest(t, "listen"))
	got, err := p.WaitPort(testContext(t), 0)
	if err != nil {
		t.Fatalf("WaitPort(0): %v", err)
	}
	// The helper prints its port after it listens; WaitPort may see the
	// socket first, so the printed line is awaited.
	want, _ := strconv.Atoi(waitForOutput(t, p, regexp.MustCompile(`port=(\d+)`))[1])
	if got.Port != want || got.Network != "tcp" || got.Addr != "127.0.0.1" || got.PID != p.Info().PID {
		t.Errorf("WaitPort(0): got %+v, want tcp 127.0.0.1:%d held by PID %d", got, want, p.Info().PID)
	}
	if again, err := p.WaitPort(testContext(t), want); err != nil || again.Port != want {
		t.Errorf("WaitPort(%d): got %+v, %v", want, again, err)
	}
	ports, err := p.Ports(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 || ports[0].Port != want {
		t.Errorf("Ports: got %+v, want only port %d (not the squatter's %d)", ports, want, squatPort)
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if ports, err := p.Ports(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Ports with an ended context: got %+v, %v, want context.Canceled", ports, err)
	}

	// The squatter's port never counts. The wait ends by its deadline,
	// after at least one scan of the watcher has seen the tree.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if pt, err := p.WaitPort(ctx, squatPort); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitPort(squatter's %d): got %+v, %v, want DeadlineExceeded", squatPort, pt, err)
	}
}

// TestWaitPortExited: a process that exits without listening ends the wait
// with ErrExited.
func TestWaitPortExited(t *testing.T) {
	t.Parallel()
	skipWithoutPorts(t)
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: "exit 0"})
	if _, err := p.WaitPort(testContext(t), 0); !errors.Is(err, agentproc.ErrExited) {
		t.Errorf("WaitPort: got %v, want ErrExited", err)
	}
	if _, err := p.WaitPort(testContext(t), 70000); !errors.Is(err, agentproc.ErrInvalidRequest) {
		t.Errorf("WaitPort(70000): got %v, want ErrInvalidRequest", err)
	}
}

// TestWaitPortPythonHTTPServer waits for a real python3 -m http.server,
// which binds a port the kernel chooses, and for the Info.Ports of a
// Background process and the ready event of Request.Ready.
func TestWaitPortPythonHTTPServer(t *testing.T) {
	t.Parallel()
	skipWithoutPorts(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	m := newManager(t)
	ctx := testContext(t)
	events := m.Subscribe(ctx)
	p := mustStart(t, m, agentproc.Request{
		Command:    "exec python3 -u -m http.server 0 --bind 127.0.0.1",
		Background: true,
		Ready:      &agentproc.ReadyCheck{},
	})
	got, err := p.WaitPort(ctx, 0)
	if err != nil {
		t.Fatalf("WaitPort: %v", err)
	}
	want, _ := strconv.Atoi(waitForOutput(t, p, regexp.MustCompile(`port (\d+)`))[1])
	if got.Port != want {
		t.Errorf("WaitPort: got %+v, want port %d", got, want)
	}
	for e := range events {
		if e.Type == agentproc.EventReady {
			if e.ID != p.ID() || e.Port == nil || e.Port.Port != want {
				t.Errorf("ready event: got %+v, want port %d of %s", e, want, p.ID())
			}
			break
		}
	}
	info := p.Info()
	if !info.Ready || len(info.Ports) != 1 || info.Ports[0].Port != want {
		t.Errorf("Info: got Ready %v Ports %+v, want ready on %d", info.Ready, info.Ports, want)
	}
	if info, _ = p.Stop(ctx); info.Ports != nil {
		t.Errorf("Info.Ports after exit: got %+v, want nil", info.Ports)
	}
}

// TestWaitPortEscapee: a server that double-forked out of the tree and
// into a session of its own (so it is neither a descendant nor in the
// process group) still counts, by the MarkerEnv marker it inherited.
func TestWaitPortEscapee(t *testing.T) {
	t.Parallel()
	skipWithoutPorts(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{
		// The subshell forks the server and exits at once, so the server
		// is reparented away from the shell.
		Command: "(setsid " + shellQuote(exe) + " &); exec sleep 600",
		Env:     map[string]string{agentproc.HelperEnv: agentproc.UseHelper("listen")},
	})
	want, _ := strconv.Atoi(waitForOutput(t, p, regexp.MustCompile(`port=(\d+)`))[1])
	got, err := p.WaitPort(testContext(t), want)
	if err != nil {
		t.Fatalf("WaitPort(%d): %v", want, err)
	}
	if got.PID == p.Info().PID {
		t.Errorf("PID: got the shell's %d, want the escaped server's", got.PID)
	}
}
