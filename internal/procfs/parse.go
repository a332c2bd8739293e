package procfs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The parsers take the contents of a /proc file and never fail on what
// they are given: a malformed file reads as "not found" (ok false, no
// call). Each has a fuzz target.

// statFields returns the fields of the contents of a /proc/PID/stat file
// from field 3 (state) on, with at least n of them and a one-letter state.
// The command name (field 2) may contain spaces and parentheses, so the
// fixed fields are read after its last ')'.
func statFields(data []byte, n int) ([][]byte, bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, false
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < n || len(fields[0]) != 1 {
		return nil, false
	}
	return fields, true
}

// ParseStat returns the state and process group (field 5) of the contents
// of a /proc/PID/stat file.
func ParseStat(data []byte) (state byte, pgrp int, ok bool) {
	fields, ok := statFields(data, 3)
	if !ok {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(fields[2]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], pgrp, true
}

// ParseStatStart returns field 22 (starttime, in clock ticks since boot)
// and the state of the contents of a /proc/PID/stat file.
func ParseStatStart(data []byte) (start uint64, state byte, ok bool) {
	fields, ok := statFields(data, 20) // fields[19] is field 22
	if !ok {
		return 0, 0, false
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return start, fields[0][0], true
}

// kernelThread is PF_KTHREAD in the flags of /proc/PID/stat (field 9).
const kernelThread = 0x00200000

// ParseStatEnv returns what the contents of a /proc/PID/stat file say of
// the process's environment: its state, whether it is a kernel thread
// (PF_KTHREAD in field 9, flags), which has none, and whether its memory
// has an environment set up (field 51, env_end, not 0). The kernel prints
// env_end 0 for a process without memory (a zombie, a kernel thread, one
// exiting), for one between exec's switch to the new program's memory and
// the setup of its stack, and to a reader that may not ptrace the process.
// ok is false for a file without the field (Linux before 3.5).
func ParseStatEnv(data []byte) (state byte, kernel, envSet, ok bool) {
	fields, ok := statFields(data, 49) // fields[48] is field 51
	if !ok {
		return 0, false, false, false
	}
	flags, err := strconv.ParseUint(string(fields[6]), 10, 64)
	if err != nil {
		return 0, false, false, false
	}
	envEnd, err := strconv.ParseUint(string(fields[48]), 10, 64)
	if err != nil {
		return 0, false, false, false
	}
	return fields[0][0], flags&kernelThread != 0, envEnd != 0, true
}

// EnvValue returns the value of the variable whose "NAME=" is prefix in a
// NUL-separated environment block (/proc/PID/environ): the first entry
// that starts with prefix.
func EnvValue(env, prefix []byte) ([]byte, bool) {
	for len(env) > 0 {
		entry := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			entry, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if bytes.HasPrefix(entry, prefix) {
			return entry[len(prefix):], true
		}
	}
	return nil, false
}

// HasEnvEntry reports whether env, a block of NUL-terminated NAME=value
// strings, holds entry as one whole string. A longer name that merely starts
// with the same bytes (AGENTPROC_ID_X=...) or a value with a common prefix
// does not match.
func HasEnvEntry(env, entry []byte) bool {
	for off := 0; off < len(env); {
		i := bytes.Index(env[off:], entry)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(entry)
		if (i == 0 || env[i-1] == 0) && (end == len(env) || env[end] == 0) {
			return true
		}
		off = i + 1
	}
	return false
}

// InCgroupLeaf reports whether a /proc/PID/cgroup file names, in any
// hierarchy, a path that ends in the directory leaf. The paths there are
// relative to the reader's cgroup namespace, so only the last element can
// be compared.
func InCgroupLeaf(data []byte, leaf string) bool {
	suffix := []byte("/" + leaf)
	for line := range bytes.Lines(data) {
		// hierarchy-ID:controllers:path
		_, rest, _ := bytes.Cut(bytes.TrimRight(line, "\n"), []byte(":"))
		_, path, ok := bytes.Cut(rest, []byte(":"))
		if ok && bytes.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}

// SocketInode parses an fd link of the form "socket:[12345]".
func SocketInode(link []byte) (uint64, bool) { return ParseNSLink(link, "socket") }

// ParseNSLink parses a link of the form "kind:[12345]": a namespace's
// under /proc/PID/ns ("mnt:[4026531841]"), a socket's or pipe's fd link.
func ParseNSLink(link []byte, kind string) (uint64, bool) {
	rest, ok := bytes.CutPrefix(link, []byte(kind))
	if !ok {
		return 0, false
	}
	rest, ok = bytes.CutPrefix(rest, []byte(":["))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != ']' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(rest[:len(rest)-1]), 10, 64)
	return v, err == nil
}

// Socket states as /proc/net/{tcp,udp}[6] print them.
const (
	TCPListen = "0A" // TCP_LISTEN
	UDPBound  = "07" // TCP_CLOSE, which for UDP means bound, not connected
)

// ParseSocketTable calls fn for every socket of a /proc/net/{tcp,udp}[6]
// table in the given state (TCPListen, UDPBound) with a port and an inode.
// A line reads
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
//
// with addresses as hex words in host byte order, then ":" and the port
// in hex.
func ParseSocketTable(data []byte, state string, fn func(inode uint64, addr netip.Addr, port int)) {
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
		fn(inode, addr, port)
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

// ParseSyscall parses a /proc/PID/task/TID/syscall file: "NR ARG1 ...
// ARG6 SP PC" with hex arguments when the thread is blocked in a system
// call, "running", or "-1 SP PC" when it is not in one. ok is false unless
// the file names a call with at least three more fields; an argument that
// is missing or not hex reads as 0.
func ParseSyscall(data []byte) (nr int, args [6]uint64, ok bool) {
	f := bytes.Fields(data)
	if len(f) < 4 {
		return 0, args, false
	}
	nr, err := strconv.Atoi(string(f[0]))
	if err != nil {
		return 0, args, false
	}
	for i := range min(len(args), len(f)-1) {
		args[i], _ = strconv.ParseUint(string(bytes.TrimPrefix(f[i+1], []byte("0x"))), 16, 64)
	}
	return nr, args, true
}

// VMStat returns the value of key in the contents of /proc/vmstat (lines
// of "key value"), from its first line for key.
func VMStat(data []byte, key string) (uint64, bool) {
	prefix := []byte(key + " ")
	for line := range bytes.Lines(data) {
		if v, ok := bytes.CutPrefix(line, prefix); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// StatusField returns the value of the field name in the contents of a
// /proc/PID/status file (lines of "Name:\tvalue"), from its first line for
// name, with the surrounding white space trimmed.
func StatusField(status []byte, name string) ([]byte, bool) {
	prefix := []byte(name + ":")
	for line := range bytes.Lines(status) {
		if v, ok := bytes.CutPrefix(line, prefix); ok {
			return bytes.TrimSpace(v), true
		}
	}
	return nil, false
}

// Mount is one line of a mountinfo file (/proc/PID/mountinfo), its paths
// unescaped.
type Mount struct {
	Dev     string // the file system's device, MAJ:MIN
	Root    string // the path within the file system that the mount shows
	Point   string // where it is mounted
	Options string // the per-mount options ("rw,nosuid"); empty if missing
	FSType  string // after the " - " separator
	Source  string // the mount's source as the mounter gave it (a device, a directory, "none"); empty if missing
	Super   string // the superblock's options; empty if missing
}

// ReadOnly reports whether m is mounted read-only (its per-mount options
// hold "ro").
func (m Mount) ReadOnly() bool {
	for opt := range strings.SplitSeq(m.Options, ",") {
		if opt == "ro" {
			return true
		}
	}
	return false
}

// ParseMountinfo calls fn for each line of data, the contents of a
// mountinfo file, that has at least its first five fields, the " - "
// separator and a file system type after it:
//
//	ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
func ParseMountinfo(data []byte, fn func(Mount)) {
	for line := range strings.Lines(string(data)) {
		left, right, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " - ")
		if !ok {
			continue
		}
		fields, after := strings.Fields(left), strings.Fields(right)
		if len(fields) < 5 || len(after) < 1 {
			continue
		}
		m := Mount{Dev: fields[2], Root: unescapeMountinfo(fields[3]), Point: unescapeMountinfo(fields[4]), FSType: after[0]}
		if len(fields) > 5 {
			m.Options = fields[5]
		}
		if len(after) > 1 {
			m.Source = unescapeMountinfo(after[1])
		}
		if len(after) > 2 {
			m.Super = after[2]
		}
		fn(m)
	}
}

// Unescape undoes the octal escapes (\040 for a space) that mountinfo
// uses in paths, and that /etc/fstab and /etc/crypttab use the same way
// (fstab(5); getmntent undoes them).
func Unescape(s string) string { return unescapeMountinfo(s) }

// unescapeMountinfo undoes the octal escapes (\040 for a space) that
// mountinfo uses in paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// OverlayLayers returns the directories an overlay mount (FSType
// "overlay") shows merged at its point: its upper layer and each lower
// and data-only layer, as the mounter named them, from the superblock's
// options (super). The kernel escapes each option's value (a comma, an
// equals sign, white space and a backslash in octal, \054), and within
// the legacy lowerdir= list a colon in a path is written \: (so \134: after
// the kernel's escape) while a bare colon separates layers ("::" before
// the data-only ones). The workdir is the overlay's scratch space, not
// shown, and is left out. A name may be relative to the mounter's working
// directory or pass through links; the caller resolves it.
func OverlayLayers(super string) []string {
	var out []string
	for opt := range strings.SplitSeq(super, ",") {
		key, val, ok := strings.Cut(opt, "=")
		if !ok {
			continue
		}
		val = unescapeMountinfo(val)
		switch key {
		case "upperdir", "lowerdir+", "datadir+":
			out = append(out, val)
		case "lowerdir":
			out = append(out, splitLowerdir(val)...)
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// splitLowerdir splits a legacy lowerdir= list at each colon that is not
// escaped with a backslash, and undoes the escape in each layer's name.
func splitLowerdir(s string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case s[i] == ':':
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(s[i])
		}
	}
	return append(out, b.String())
}
