package agentproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// Exported to the black-box tests in package agentproc_test.
const (
	HelperModeEnv = helperModeEnv
	HelperAddrEnv = helperAddrEnv
)

var (
	UnderWine = underWine
	WaitGone  = waitGone
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
//	barrier      report, then exit when the test calls PIDReporter.Release
//	console      print whether it has a console and a visible window
//	nestedjob    run "echo nested" through a Manager (see runNestedJobHelper)
//	commit       commit 256 MiB with VirtualAlloc, say "committed" or
//	             "commit failed: ERR" (for Limits.Memory)
func runHelper(mode string) int {
	if addr := os.Getenv(helperAddrEnv); addr != "" {
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper: dial:", err)
			return 2
		}
		// The stdout handle lets a test duplicate the helper's output
		// pipe into a process outside the job (TestDrainBoundedOutsideJob).
		fmt.Fprintf(conn, "%s %d %d\n", mode, os.Getpid(), os.Stdout.Fd())
		if mode == "barrier" {
			// Block until the test lets go, so the shell cannot exit
			// before its other children have reported.
			_, _ = conn.Read(make([]byte, 1))
			_ = conn.Close()
			return 0
		}
		_ = conn.Close()
	}
	switch mode {
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "ignorebreak":
		// Go delivers CTRL_BREAK_EVENT as os.Interrupt. The event must be
		// swallowed, not ignored: with signal.Ignore the runtime's console
		// handler returns FALSE, and Windows then runs the default
		// handler, which calls ExitProcess. With a channel registered (and
		// never read) the runtime's handler returns TRUE, which ends the
		// event's delivery to this process.
		signal.Notify(make(chan os.Signal, 1), os.Interrupt)
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
	case "console":
		// Whether this process has a console and whether its window shows
		// (TestSysProcConsole).
		_, err := windows.GetConsoleCP()
		w, _, _ := procGetConsoleWindow.Call()
		visible, _, _ := windows.NewLazySystemDLL("user32.dll").NewProc("IsWindowVisible").Call(w)
		fmt.Printf("console=%v visible=%v\n", err == nil, w != 0 && visible != 0)
		return 0
	case "nestedjob":
		// Run one command through a Manager from inside whatever job the
		// test put this helper in (TestNestedJob).
		return runNestedJobHelper()
	case "commit":
		// VirtualAlloc directly: the Go allocator would throw on a failed
		// commit instead of saying so.
		if _, err := windows.VirtualAlloc(0, 256<<20, windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE); err != nil {
			fmt.Println("commit failed:", err)
			return 1
		}
		fmt.Println("committed")
		return 0
	}
	fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
	return 2
}

// runNestedJobHelper starts "echo nested" and exits 0 when it ran, 4 when
// Start failed with ErrUnsupported (the error is printed), 5 otherwise.
func runNestedJobHelper() int {
	m := New()
	defer m.Close()
	p, err := m.Start(Request{Command: "echo nested"})
	if err != nil {
		fmt.Println("start:", err)
		if errors.Is(err, ErrUnsupported) {
			return 4
		}
		return 5
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		fmt.Println("wait:", err)
		return 5
	}
	fmt.Print(p.Output().Text)
	return 0
}

// underWine reports whether the test binary runs under Wine, whose ntdll
// exports wine_get_version. Tests skip only under Wine, and only for a
// named Wine gap; on real Windows every test runs.
func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// PIDReporter listens on loopback for helpers reporting their PIDs.
type PIDReporter struct {
	t        *testing.T
	ln       *net.TCPListener
	barriers []net.Conn
}

func NewPIDReporter(t *testing.T) *PIDReporter {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	r := &PIDReporter{t: t, ln: ln}
	t.Cleanup(func() {
		_ = ln.Close()
		r.Release()
	})
	return r
}

// Addr is the address helpers report to, the value for helperAddrEnv.
func (r *PIDReporter) Addr() string { return r.ln.Addr().String() }

// Env is the environment entry that makes a helper report to r.
func (r *PIDReporter) Env() string { return helperAddrEnv + "=" + r.ln.Addr().String() }

// Next waits until deadline for one helper to report and returns its mode
// and a handle to it, opened while it is known to be alive so that the PID
// cannot have been reused.
func (r *PIDReporter) Next(deadline time.Time) (string, windows.Handle) {
	r.t.Helper()
	rep := r.NextReport(deadline)
	return rep.Mode, rep.Handle
}

// HelperReport is what a helper reported, with a handle to it.
type HelperReport struct {
	Mode   string
	PID    uint32
	Stdout uintptr // the helper's stdout handle, in its own handle table
	Handle windows.Handle
}

// NextReport is Next with everything the helper reported.
func (r *PIDReporter) NextReport(deadline time.Time) HelperReport {
	r.t.Helper()
	if err := r.ln.SetDeadline(deadline); err != nil {
		r.t.Fatalf("set deadline: %v", err)
	}
	conn, err := r.ln.Accept()
	if err != nil {
		r.t.Fatalf("waiting for helper to report its PID: %v", err)
	}
	_ = conn.SetReadDeadline(deadline)
	line, err := bufio.NewReader(conn).ReadString('\n')
	fields := strings.Fields(line)
	var mode string
	var pid, stdout int
	perr := strconv.ErrSyntax
	if len(fields) == 3 {
		mode = fields[0]
		pid, perr = strconv.Atoi(fields[1])
		if perr == nil {
			stdout, perr = strconv.Atoi(fields[2])
		}
	}
	if err != nil || perr != nil {
		_ = conn.Close()
		r.t.Fatalf("helper reported %q: %v %v", line, err, perr)
	}
	if mode == "barrier" {
		_ = conn.SetReadDeadline(time.Time{})
		r.barriers = append(r.barriers, conn)
	} else {
		_ = conn.Close()
	}
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		r.t.Fatalf("open helper %d: %v", pid, err)
	}
	r.t.Cleanup(func() { _ = windows.CloseHandle(h) })
	return HelperReport{Mode: mode, PID: uint32(pid), Stdout: uintptr(stdout), Handle: h}
}

// Release lets every barrier helper that has reported exit.
func (r *PIDReporter) Release() {
	for _, c := range r.barriers {
		_ = c.Close()
	}
	r.barriers = nil
}

// waitGone waits up to d for the process behind h to exit.
func waitGone(h windows.Handle, d time.Duration) bool {
	ev, err := windows.WaitForSingleObject(h, uint32(d/time.Millisecond))
	return err == nil && ev == windows.WAIT_OBJECT_0
}
