package agentproc

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
)

// TestWindowsSocketTableLayout reads the real TCP listener table and finds
// this test's own listener in it by address and port, which checks the row
// layout parseOwnerTable assumes (the owner PID is checked too, except
// under Wine, which reports none), and lists a job's processes.
func TestWindowsSocketTableLayout(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	want := ln.Addr().(*net.TCPAddr).Port
	table, err := socketTable(getExtendedTCPTable, 2 /* AF_INET */, tcpTableOwnerPIDListener)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	parseOwnerTable(table, "tcp", func(_ string, addr netip.Addr, port, pid uint32) {
		p := int(port&0xff)<<8 | int(port>>8&0xff)
		if p == want && addr == netip.MustParseAddr("127.0.0.1") {
			found = true
			if !underWine() && int(pid) != pidOfSelf() {
				t.Errorf("owner of our listener: got PID %d, want %d", pid, pidOfSelf())
			}
		}
	})
	if !found {
		t.Errorf("our listener 127.0.0.1:%d is not in the TCP table", want)
	}

	m := New()
	defer m.Close()
	p, err := m.Start(t.Context(), Request{Command: "ping -n 30 127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if pids := p.sup.sys.jobPIDs(); !slices.Contains(pids, uint32(p.sup.cmd.Process.Pid)) {
		t.Errorf("job PIDs: got %v, want the shell's %d among them", pids, p.sup.cmd.Process.Pid)
	}
}

func pidOfSelf() int { return os.Getpid() }
