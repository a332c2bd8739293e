package agentproc

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// The Windows tests start this test binary as a predictable child (the
// helper-process pattern): when helperModeEnv is set, init runs the helper
// and exits before any test or TestMain runs.
const (
	helperModeEnv = "AGENTPROC_WINDOWS_HELPER"
	// helperAddrEnv is a loopback address the helper dials to report its
	// PID, so a test learns a grandchild's PID without polling output.
	helperAddrEnv = "AGENTPROC_WINDOWS_HELPER_ADDR"
)

func init() {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		return
	}
	os.Exit(runHelper(mode))
}

// runHelper modes:
//
//	sleep        report the PID, then sleep until killed
//	ignorebreak  ignore Ctrl+Break, say "ready", sleep until killed
//	onbreak      say "ready", exit 3 with "got break" on Ctrl+Break
func runHelper(mode string) int {
	if addr := os.Getenv(helperAddrEnv); addr != "" {
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper: dial:", err)
			return 2
		}
		fmt.Fprintf(conn, "%d\n", os.Getpid())
		_ = conn.Close()
	}
	switch mode {
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "ignorebreak":
		// Go delivers CTRL_BREAK_EVENT as os.Interrupt.
		signal.Ignore(os.Interrupt)
		fmt.Println("ready")
		time.Sleep(time.Minute)
		return 0
	case "onbreak":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		fmt.Println("ready")
		select {
		case <-ch:
			fmt.Println("got break")
			return 3
		case <-time.After(time.Minute):
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
	return 2
}

// underWine reports whether the test binary runs under Wine, whose ntdll
// exports wine_get_version. Tests skip only under Wine, and only for a
// named Wine gap; on real Windows every test runs.
func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// pidReporter listens on loopback for helpers reporting their PIDs.
type pidReporter struct {
	t  *testing.T
	ln *net.TCPListener
}

func newPIDReporter(t *testing.T) *pidReporter {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return &pidReporter{t: t, ln: ln}
}

// env is the environment entry that makes a helper report to r.
func (r *pidReporter) env() string { return helperAddrEnv + "=" + r.ln.Addr().String() }

// next waits until deadline for one helper to report and returns a handle
// to it, opened while it is known to be alive so that the PID cannot have
// been reused.
func (r *pidReporter) next(deadline time.Time) windows.Handle {
	r.t.Helper()
	if err := r.ln.SetDeadline(deadline); err != nil {
		r.t.Fatalf("set deadline: %v", err)
	}
	conn, err := r.ln.Accept()
	if err != nil {
		r.t.Fatalf("waiting for helper to report its PID: %v", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(deadline)
	buf := make([]byte, 32)
	n, _ := conn.Read(buf)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	if err != nil {
		r.t.Fatalf("helper reported %q: %v", buf[:n], err)
	}
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		r.t.Fatalf("open helper %d: %v", pid, err)
	}
	r.t.Cleanup(func() { _ = windows.CloseHandle(h) })
	return h
}

// waitGone waits up to d for the process behind h to exit.
func waitGone(h windows.Handle, d time.Duration) bool {
	ev, err := windows.WaitForSingleObject(h, uint32(d/time.Millisecond))
	return err == nil && ev == windows.WAIT_OBJECT_0
}
