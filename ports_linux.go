package agentproc

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
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
	defer s.close()
	members, err := s.treeMembers(cache, trees)
	if err != nil {
		return nil, err
	}
	sockets := make(map[uint64]treeMember) // socket inode -> holder
	for _, m := range members {
		s.socketInodes(m, sockets)
	}
	if len(sockets) == 0 {
		return out, nil
	}
	// A sandboxed tree may live in a network namespace of its own
	// (Sandbox.Network), whose sockets only its own /proc/PID/net lists:
	// the tables are read once per namespace a holder is in.
	for _, dir := range socketTableDirs(sockets) {
		readSocketTables(dir, sockets, out)
	}
	for i := range out {
		out[i] = dedupePorts(out[i])
	}
	return out, nil
}

// socketTableDirs returns, for each network namespace a holder of sockets
// is in, a /proc directory whose tcp, udp tables are that namespace's:
// /proc/net for this process's own, /proc/PID/net for another.
func socketTableDirs(sockets map[uint64]treeMember) []string {
	own, _ := os.Readlink("/proc/self/ns/net")
	seen := map[string]bool{}
	var dirs []string
	holders := map[int]bool{}
	for _, m := range sockets {
		holders[m.pid] = true
	}
	for pid := range holders {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
		dir := "/proc/" + strconv.Itoa(pid) + "/net/"
		if err != nil || ns == own {
			ns, dir = own, "/proc/net/"
		}
		if !seen[ns] {
			seen[ns] = true
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// readSocketTables adds to out the listening sockets of sockets that the
// tables in dir list.
func readSocketTables(dir string, sockets map[uint64]treeMember, out [][]Port) {
	for _, table := range []struct {
		name, network string
		state         string // the bound-and-waiting state in that table
	}{
		{"tcp", "tcp", "0A"}, // TCP_LISTEN
		{"tcp6", "tcp6", "0A"},
		{"udp", "udp", "07"}, // TCP_CLOSE: bound, not connected
		{"udp6", "udp6", "07"},
	} {
		data, err := os.ReadFile(dir + table.name)
		if err != nil {
			continue // no IPv6 in this kernel, for instance
		}
		parseSocketTable(data, table.network, table.state, func(inode uint64, pt Port) {
			if m, ok := sockets[inode]; ok {
				pt.PID = m.pid
				out[m.tree] = append(out[m.tree], pt)
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
func (s *procScanner) treeMembers(cache *portCache, trees []portTree) ([]treeMember, error) {
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
		for _, pid := range descendants(t.leader) {
			add(pid, i)
		}
	}

	pids, err := s.pids()
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
		if ok && ent.id != "" && s.startTime(pid) != ent.start {
			ok = false // the PID was reused
		}
		if !ok {
			ent = markerEntry{}
			if env, _, err := s.read(pid, "environ", false); err == nil {
				if id, found := envValue(env, markerPrefix); found {
					// Copied before the next read reuses the buffer.
					ent.id = string(id)
					ent.start = s.startTime(pid)
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
func (s *procScanner) socketInodes(m treeMember, into map[uint64]treeMember) {
	s.fdLinks(m.pid, func(link []byte) {
		inode, ok := socketInode(link)
		if !ok {
			return
		}
		if old, ok := into[inode]; !ok || m.pid < old.pid {
			into[inode] = m
		}
	})
}

// socketInode parses an fd link of the form "socket:[12345]".
func socketInode(link []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(link, []byte("socket:["))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != ']' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(rest[:len(rest)-1]), 10, 64)
	return v, err == nil
}

// parseSocketTable calls fn for every socket of a /proc/net/{tcp,udp}[6]
// table in the given state. A line reads
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
//
// with addresses as hex words in host byte order, then ":" and the port
// in hex.
func parseSocketTable(data []byte, network, state string, fn func(inode uint64, pt Port)) {
	lines := bytes.Split(data, []byte("\n"))
	for _, line := range lines[min(1, len(lines)):] { // the first line is the header
		f := bytes.Fields(line)
		if len(f) < 10 || string(f[3]) != state {
			continue
		}
		addr, port, ok := parseHexAddr(f[1])
		if !ok || port == 0 {
			continue
		}
		inode, err := strconv.ParseUint(string(f[9]), 10, 64)
		if err != nil || inode == 0 {
			continue
		}
		fn(inode, Port{Network: network, Addr: addr.String(), Port: port})
	}
}

// parseHexAddr parses "0100007F:1F90" (IPv4) or its 32-digit IPv6 form.
func parseHexAddr(b []byte) (netip.Addr, int, bool) {
	ip, port, ok := bytes.Cut(b, []byte(":"))
	if !ok {
		return netip.Addr{}, 0, false
	}
	p, err := strconv.ParseUint(string(port), 16, 16)
	if err != nil {
		return netip.Addr{}, 0, false
	}
	raw := make([]byte, hex.DecodedLen(len(ip)))
	if _, err := hex.Decode(raw, ip); err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, 0, false
	}
	// Each 32-bit word was printed as a number in host byte order; its
	// bytes in memory are the address bytes in network order.
	for i := 0; i < len(raw); i += 4 {
		w := binary.BigEndian.Uint32(raw[i:])
		binary.NativeEndian.PutUint32(raw[i:], w)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return addr, int(p), true
}
