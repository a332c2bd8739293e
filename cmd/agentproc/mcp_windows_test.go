package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The MCP session on Windows (runSession, with cmd.exe commands), and what
// the Windows tests of the command share. They run under Wine in CI (make
// test-windows).

// underWine reports whether the test binary runs under Wine, whose ntdll
// exports wine_get_version.
func underWine() bool {
	return syscall.NewLazyDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// alive reports whether pid is a process that has not ended.
func alive(pid int) bool {
	h, err := syscall.OpenProcess(syscall.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		return false // no such process (any more)
	}
	defer syscall.CloseHandle(h)
	ev, _ := syscall.WaitForSingleObject(h, 0)
	return ev == uint32(syscall.WAIT_TIMEOUT)
}

// testDir makes an empty directory for one test and removes it, with the
// files in it, afterwards. Not t.TempDir: Go's RemoveAll of the nested
// directory it makes fails under Wine 8 (unlinkat: Invalid function).
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentproc-mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the work dir: %v", err)
		}
	})
	return dir
}

// helperCmd returns a cmd.exe command that runs this test binary with env
// set to value: one of the helpers of TestMain.
func helperCmd(env string, value any) string {
	return fmt.Sprintf(`set %s=%v& "%s"`, env, value, os.Args[0])
}

// sessionShell is runSession's commands in cmd.exe.
var sessionShell = shellCommands{
	server: func(port int) string { return helperCmd(listenEnv, port) },
	// stdout and stderr in one stream, cmd.exe's CRLF line ends read as
	// newlines.
	dial: func(port int) string { return helperCmd(dialEnv, port) + "& >&2 echo to stderr" },
	// call expands %name% after set /p has set it.
	prompt: `set /p name=name? & call echo hello %name%`,
	answer: "ada\r\n",
	// ping waits a second between its two echoes. Echo off rather than a
	// loop body of @(...), which Wine's cmd.exe runs as nothing.
	ticker:      `@echo off& for /l %i in (1,1,3) do (echo tick %i& ping -n 2 127.0.0.1 >nul)`,
	lastTick:    "tick 3",
	leftRunning: func(pidFile string) string { return helperCmd(pidFileEnv, pidFile) },
	// terminate sends CTRL_BREAK_EVENT, on which the default handlers
	// end the shell and the server (the exit code is not checked: this
	// has not run on real Windows).
	stop:         "terminate",
	stoppedState: "stopped by CTRL_BREAK_EVENT as asked",
	portWait:     true,
	// ping waits a second between echoes: n+1 echoes take n seconds.
	sleep: func(n int) string { return fmt.Sprintf("ping -n %d 127.0.0.1 >nul", n+1) },
}

func init() {
	if underWine() {
		// Wine 8 reports no owner of a TCP socket, so agentproc cannot
		// tell whose port it is (Ports returns ErrUnsupported there); and
		// it refuses to attach to a child's console, so no
		// CTRL_BREAK_EVENT can be sent (the root package's
		// TestWindowsStopGraceful skips there too): the server is killed.
		sessionShell.portWait = false
		sessionShell.stop = "kill"
		sessionShell.stoppedState = "stopped by TerminateJobObject as asked (exit code 1)"
	}
}
