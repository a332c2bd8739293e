package agentproc_test

import (
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// TestWindowsWaitPort: the Job Object's processes are matched against the
// TCP listener table; the test process's own listener on another port
// never counts.
func TestWindowsWaitPort(t *testing.T) {
	t.Parallel()
	squatter, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	squatPort := squatter.Addr().(*net.TCPAddr).Port

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t)
	p := mustStart(t, m, agentproc.Request{Command: `"` + exe + `"`, Env: map[string]string{helperEnv: "listen"}})
	ctx := testContext(t)
	line, err := p.WaitMatch(ctx, regexp.MustCompile(`^port=\d+$`))
	if err != nil {
		t.Fatalf("WaitMatch: %v (output %q)", err, p.Output().Text)
	}
	want, _ := strconv.Atoi(line[len("port="):])
	got, err := p.WaitPort(ctx, want)
	if errors.Is(err, agentproc.ErrUnsupported) && agentproc.UnderWine() {
		t.Skipf("Wine reports no owner PIDs in its TCP table: %v", err)
	}
	if err != nil {
		t.Fatalf("WaitPort(%d): %v", want, err)
	}
	if got.Network != "tcp" || got.Addr != "127.0.0.1" || got.PID == 0 {
		t.Errorf("WaitPort: got %+v, want tcp 127.0.0.1:%d with a PID", got, want)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if pt, err := p.WaitPort(short, squatPort); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitPort(squatter's %d): got %+v, %v, want DeadlineExceeded", squatPort, pt, err)
	}
}
