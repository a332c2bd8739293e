package agentproc

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

func portsSupported() error { return nil }

// portCache holds nothing on Windows: the tables name each socket's
// owning process directly.
type portCache struct{}

var (
	iphlpapi            = windows.NewLazySystemDLL("iphlpapi.dll")
	getExtendedTCPTable = iphlpapi.NewProc("GetExtendedTcpTable")
	getExtendedUDPTable = iphlpapi.NewProc("GetExtendedUdpTable")
)

// Table classes of GetExtendedTcpTable and GetExtendedUdpTable.
const (
	tcpTableOwnerPIDListener = 3 // TCP_TABLE_OWNER_PID_LISTENER
	udpTableOwnerPID         = 1 // UDP_TABLE_OWNER_PID
)

// listeningPorts reads the IPv4 and IPv6 TCP listener tables and UDP
// tables, each row naming its owning process, and keeps the rows owned by
// a process of a tree's Job Object (every process the shell starts is born
// into the job, and none can break away).
func listeningPorts(_ *portCache, trees []portTree) ([][]Port, error) {
	out := make([][]Port, len(trees))
	owner := make(map[uint32]int)
	for i, t := range trees {
		for _, pid := range t.sys.jobPIDs() {
			owner[pid] = i
		}
	}
	if len(owner) == 0 {
		return out, nil
	}
	add := func(network string, addr netip.Addr, port uint32, pid uint32) {
		i, ok := owner[pid]
		// The port is in network byte order in the low 16 bits.
		p := int(port&0xff)<<8 | int(port>>8&0xff)
		if ok && p != 0 {
			out[i] = append(out[i], Port{Network: network, Addr: addr.String(), Port: p, PID: int(pid)})
		}
	}
	for _, q := range []struct {
		proc    *windows.LazyProc
		family  uint32
		class   uint32
		network string
	}{
		{getExtendedTCPTable, windows.AF_INET, tcpTableOwnerPIDListener, "tcp"},
		{getExtendedTCPTable, windows.AF_INET6, tcpTableOwnerPIDListener, "tcp6"},
		{getExtendedUDPTable, windows.AF_INET, udpTableOwnerPID, "udp"},
		{getExtendedUDPTable, windows.AF_INET6, udpTableOwnerPID, "udp6"},
	} {
		table, err := socketTable(q.proc, q.family, q.class)
		if err != nil {
			return nil, xerrors.Errorf("read %s table: %w", q.network, err)
		}
		rows, owned := parseOwnerTable(table, q.network, add)
		if rows > 0 && owned == 0 {
			// Every socket owned by PID 0, the idle process, which owns
			// none on Windows: the owners are not reported at all. Wine 8
			// does this; guessing would count a squatter.
			return nil, xerrors.Errorf("listening ports on windows: the %s table reports no socket owners (Wine?): %w", q.network, ErrUnsupported)
		}
	}
	for i := range out {
		out[i] = dedupePorts(out[i])
	}
	return out, nil
}

// socketTable calls one of the GetExtended*Table functions, growing the
// buffer until the table fits (it can grow between the calls).
func socketTable(proc *windows.LazyProc, family, class uint32) ([]byte, error) {
	if err := proc.Find(); err != nil {
		return nil, err
	}
	size := uint32(16 << 10)
	for range 8 {
		buf := make([]byte, size)
		r, _, _ := proc.Call(uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0,
			uintptr(family), uintptr(class), 0)
		switch windows.Errno(r) {
		case 0:
			return buf[:size], nil
		case windows.ERROR_INSUFFICIENT_BUFFER:
			size += 4 << 10 // and try again with what it asked for, plus room to grow
		default:
			return nil, windows.Errno(r)
		}
	}
	return nil, windows.ERROR_INSUFFICIENT_BUFFER
}

// parseOwnerTable walks a MIB_{TCP,TCP6,UDP,UDP6}TABLE_OWNER_PID: a count,
// then fixed-size rows. Listener tables hold only listening sockets; UDP
// tables hold every bound socket. It returns how many rows it saw and how
// many named an owner other than PID 0.
func parseOwnerTable(table []byte, network string, add func(string, netip.Addr, uint32, uint32)) (rows, owned int) {
	if len(table) < 4 {
		return 0, 0
	}
	n := int(binary.LittleEndian.Uint32(table))
	data := table[4:]
	u32 := func(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
	var size int
	switch network {
	case "tcp":
		size = 24 // state, local addr, local port, remote addr, remote port, pid
	case "tcp6":
		size = 56 // local addr[16], scope, port, remote addr[16], scope, port, state, pid
	case "udp":
		size = 12 // local addr, local port, pid
	case "udp6":
		size = 28 // local addr[16], scope, port, pid
	}
	for i := 0; i < n && (i+1)*size <= len(data); i++ {
		r := data[i*size : (i+1)*size]
		var addr netip.Addr
		var port, pid uint32
		switch network {
		case "tcp":
			addr, port, pid = netip.AddrFrom4([4]byte(r[4:8])), u32(r, 8), u32(r, 20)
		case "tcp6":
			addr, port, pid = netip.AddrFrom16([16]byte(r[0:16])), u32(r, 20), u32(r, 52)
		case "udp":
			addr, port, pid = netip.AddrFrom4([4]byte(r[0:4])), u32(r, 4), u32(r, 8)
		case "udp6":
			addr, port, pid = netip.AddrFrom16([16]byte(r[0:16])), u32(r, 20), u32(r, 24)
		}
		rows++
		if pid != 0 {
			owned++
		}
		add(network, addr, port, pid)
	}
	return rows, owned
}

// jobPIDs lists the processes in the job (JobObjectBasicProcessIdList).
func (s *sysProc) jobPIDs() []uint32 {
	const maxIDs = 1024
	var list struct {
		assigned, listed uint32
		ids              [maxIDs]uintptr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job == 0 {
		return nil
	}
	err := windows.QueryInformationJobObject(s.job, windows.JobObjectBasicProcessIdList,
		uintptr(unsafe.Pointer(&list)), uint32(unsafe.Sizeof(list)), nil)
	if err != nil && err != windows.ERROR_MORE_DATA {
		return nil
	}
	pids := make([]uint32, 0, list.listed)
	for _, id := range list.ids[:min(list.listed, maxIDs)] {
		pids = append(pids, uint32(id))
	}
	return pids
}
