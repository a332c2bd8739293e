package agentproc

import (
	"net/netip"
	"os"

	"github.com/agentproc/agentproc/internal/procfs"
)

func portsSupported() error { return nil }

// listeningPorts finds each tree's processes (see treeMembers), collects the socket inodes behind their
// /proc/PID/fd links, and looks those up in /proc/net/{tcp,tcp6,udp,udp6}.
// The tables are read only when a member holds a socket at all.
//
// cache, which may be nil, remembers which tree's marker each process
// carries, so that a poller reads each process's environment once rather
// than on every scan.
func listeningPorts(cache *portCache, trees []portTree) ([][]Port, error) {
	out := make([][]Port, len(trees))
	s, err := newProcScanner()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	members, err := treeMembers(s, cache, trees)
	if err != nil {
		return nil, err
	}
	sockets := make(map[uint64]treeMember) // socket inode -> holder
	for _, m := range members {
		socketInodes(s, m, sockets)
	}
	if len(sockets) == 0 {
		return out, nil
	}
	// A sandboxed tree may live in a network namespace of its own
	// (Sandbox.Network), whose sockets only its own /proc/PID/net lists:
	// the tables are read once per namespace a holder is in.
	holders := map[int]bool{}
	for _, m := range sockets {
		holders[m.pid] = true
	}
	for _, dir := range procfs.NetTableDirs(holders) {
		readSocketTables(dir, sockets, out)
	}
	for i := range out {
		out[i] = dedupePorts(out[i])
	}
	return out, nil
}

// readSocketTables adds to out the listening sockets of sockets that the
// tables in dir list.
func readSocketTables(dir string, sockets map[uint64]treeMember, out [][]Port) {
	for _, table := range []struct {
		name, network string
		state         string // the bound-and-waiting state in that table
	}{
		{"tcp", "tcp", procfs.TCPListen},
		{"tcp6", "tcp6", procfs.TCPListen},
		{"udp", "udp", procfs.UDPBound},
		{"udp6", "udp6", procfs.UDPBound},
	} {
		data, err := os.ReadFile(dir + table.name)
		if err != nil {
			continue // no IPv6 in this kernel, for instance
		}
		procfs.ParseSocketTable(data, table.state, func(inode uint64, addr netip.Addr, port int) {
			if m, ok := sockets[inode]; ok {
				out[m.tree] = append(out[m.tree], Port{Network: table.network, Addr: addr.String(), Port: port, PID: m.pid})
			}
		})
	}
}

// socketInodes adds the inode of every socket m's process has open.
func socketInodes(s *procScanner, m treeMember, into map[uint64]treeMember) {
	s.SocketInodes(m.pid, func(inode uint64) {
		if old, ok := into[inode]; !ok || m.pid < old.pid {
			into[inode] = m
		}
	})
}
