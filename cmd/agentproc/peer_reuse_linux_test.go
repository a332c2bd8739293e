package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestConfinedPeerPIDReused: a confined process connects to serve's socket
// and exits before serve accepts (a tree can delay the accept: serve's
// accept loop backs off while its descriptors are used up), and an
// unconfined process then takes its PID (pid_max is 32768 on many hosts; a
// tree cycles through it in seconds and leaves the next PID to whatever
// the host starts next). SO_PEERCRED still names the PID, and serve used to
// judge the new process, unconfined, and run the request. The peer must be
// refused as gone. The helper connects under setpriv --no-new-privs (more
// confined than the test); as root the test picks the reused PID through
// ns_last_pid.
func TestConfinedPeerPIDReused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("choosing the next PID (ns_last_pid) needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connect := func() (int, *net.UnixConn) {
		t.Helper()
		cmd := exec.CommandContext(ctx, setpriv, "--no-new-privs", os.Args[0])
		cmd.Env = append(os.Environ(), unixDialEnv+"="+sock)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("confined connector: %v %s", err, out)
		}
		_ = ln.SetDeadline(time.Now().Add(10 * time.Second))
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid, c
	}
	// Control: the same connector, judged while its PID names nothing, is
	// refused (gone), so it is the reuse that gets through.
	_, c := connect()
	if why := confinedPeer(c); why == "" {
		t.Fatalf("control: a confined peer that has exited: got accepted, want refused")
	}
	_ = c.Close()
	for attempt := 0; ; attempt++ {
		pid, c := connect()
		reuser, ok := startAtPID(ctx, t, pid)
		if !ok {
			_ = c.Close()
			if attempt == 20 {
				t.Skip("could not start a process at a chosen PID in 20 attempts (a busy host)")
			}
			continue
		}
		why := confinedPeer(c)
		_ = c.Close()
		_ = reuser.Process.Kill()
		_ = reuser.Wait()
		if why == "" {
			t.Errorf("peer PID %d reused by an unconfined process: got accepted, want refused (the connecting process is gone)", pid)
		}
		return
	}
}

// startAtPID starts an unconfined sleep at PID pid, if the next PID can be
// steered there (ns_last_pid) before another process takes it.
func startAtPID(ctx context.Context, t *testing.T, pid int) (*exec.Cmd, bool) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
		t.Skipf("ns_last_pid: %v", err)
	}
	cmd := exec.CommandContext(ctx, "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if cmd.Process.Pid == pid {
		return cmd, true
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, false
}
