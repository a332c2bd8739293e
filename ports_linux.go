package agentproc

import (
	"bytes"
	"net/netip"
	"os"
	"strconv"

	"github.com/agentproc/agentproc/internal/procfs"
)

func portsSupported() error { return nil }

// treeMember is a process found to belong to trees[tree].
type treeMember struct {
	pid, tree int
}

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

// treeMembers returns the processes of each tree: the leader and its
// descendants (from /proc/PID/task/TID/children, which costs in proportion
// to the tree), every process whose environment carries the tree's marker,
// and the members of its cgroup. A process belongs to the first tree that
// claims it.
//
// Finding marked processes means looking at every process of the system,
// but the environment a process was exec'd with never changes: with a
// cache, each process's environment is read once, and only a marked
// process's start time is read again (to tell it from a later process
// that got the same PID).
func treeMembers(s *procScanner, cache *portCache, trees []portTree) ([]treeMember, error) {
	if cache == nil {
		cache = &portCache{}
	}
	if cache.marker == nil {
		cache.marker = make(map[int]markerEntry)
	}
	byID := make(map[string]int, len(trees))
	for i, t := range trees {
		byID[t.id] = i
	}
	seen := make(map[int]bool)
	var members []treeMember
	add := func(pid, tree int) {
		if !seen[pid] {
			seen[pid] = true
			members = append(members, treeMember{pid, tree})
		}
	}
	for i, t := range trees {
		for _, pid := range procfs.Descendants(t.leader) {
			add(pid, i)
		}
	}

	pids, err := s.PIDs()
	if err != nil {
		return nil, err
	}
	alive := make(map[int]bool, len(pids))
	for _, pid := range pids {
		alive[pid] = true
		if seen[pid] {
			continue
		}
		ent, ok := cache.marker[pid]
		if ok && ent.id != "" && s.StartTime(pid) != ent.start {
			ok = false // the PID was reused
		}
		if !ok {
			ent = markerEntry{}
			if env, _, err := s.Read(pid, "environ", false); err == nil {
				if id, found := procfs.EnvValue(env, markerPrefix); found {
					// Copied before the next read reuses the buffer.
					ent.id = string(id)
					ent.start = s.StartTime(pid)
				}
			}
			cache.marker[pid] = ent
		}
		if i, ok := byID[ent.id]; ok && ent.id != "" {
			add(pid, i)
		}
	}
	for pid := range cache.marker {
		if !alive[pid] {
			delete(cache.marker, pid)
		}
	}

	for i, t := range trees {
		if t.cgroup == "" {
			continue
		}
		data, err := os.ReadFile(t.cgroup + "/cgroup.procs")
		if err != nil {
			continue // removed: the process has exited
		}
		for _, f := range bytes.Fields(data) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				add(pid, i)
			}
		}
	}
	return members, nil
}

// portCache is what a port poller keeps between scans: the marker each
// process carries ("" for none), with the start time of marked ones.
type portCache struct {
	marker map[int]markerEntry
}

type markerEntry struct {
	start uint64 // /proc/PID/stat's starttime; 0 if unknown
	id    string
}

// socketInodes adds the inode of every socket m's process has open.
func socketInodes(s *procScanner, m treeMember, into map[uint64]treeMember) {
	s.SocketInodes(m.pid, func(inode uint64) {
		if old, ok := into[inode]; !ok || m.pid < old.pid {
			into[inode] = m
		}
	})
}
