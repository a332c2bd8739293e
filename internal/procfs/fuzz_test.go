package procfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseStat checks the stat parsers on any input (they agree on the
// state, which is a one-letter field after the last ')') and reads back a
// stat line built from its fields, whatever the command name holds.
func FuzzParseStat(f *testing.F) {
	rest := " S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	f.Add([]byte("17 (sh)"+rest), "sh", byte('S'), 4242, uint64(987654))
	f.Add([]byte("17 (a) b (c))"+rest), "a) b (c", byte('Z'), -1, uint64(0))
	f.Add([]byte("17 (sh) S 1"), "", byte('R'), 0, uint64(1)<<63)
	f.Fuzz(func(t *testing.T, data []byte, comm string, state byte, pgrp int, start uint64) {
		st, _, ok := ParseStat(data)
		_, st2, ok2 := ParseStatStart(data)
		if ok2 && !ok {
			// A file with a start time has a group field too: only a
			// group that is not a number fails ParseStat.
			fields, _ := statFields(data, 3)
			if _, err := strconv.Atoi(string(fields[2])); err == nil {
				t.Fatalf("%q: ParseStatStart ok but ParseStat not", data)
			}
		}
		if ok && ok2 && st != st2 {
			t.Fatalf("%q: states %q and %q", data, st, st2)
		}
		if st3, _, _, ok3 := ParseStatEnv(data); ok3 && ok2 && st3 != st2 {
			t.Fatalf("%q: states %q and %q", data, st3, st2)
		}
		if ok {
			after := data[bytes.LastIndexByte(data, ')')+1:]
			if first := bytes.Fields(after)[0]; len(first) != 1 || first[0] != st {
				t.Fatalf("%q: state %q, want the field %q", data, st, first)
			}
		}

		// A line the kernel would print: the name is cut at 15 bytes
		// there, but any name without a newline must parse.
		if state <= ' ' || state == ')' || state >= 0x7f || strings.ContainsAny(comm, "\n") {
			return
		}
		line := fmt.Sprintf("17 (%s) %c 1 %d 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %d 1000 10\n", comm, state, pgrp, start)
		if st, g, ok := ParseStat([]byte(line)); !ok || st != state || g != pgrp {
			t.Fatalf("ParseStat(%q) = %q %d %v, want %q %d", line, st, g, ok, state, pgrp)
		}
		if s, st, ok := ParseStatStart([]byte(line)); !ok || st != state || s != start {
			t.Fatalf("ParseStatStart(%q) = %d %q %v, want %d %q", line, s, st, ok, start, state)
		}
	})
}

// FuzzEnviron compares HasEnvEntry and EnvValue with the obvious model: the
// block split at each NUL.
func FuzzEnviron(f *testing.F) {
	f.Add([]byte("A=1\x00AGENTPROC_ID=x\x00"), []byte("AGENTPROC_ID=x"))
	f.Add([]byte("X_AGENTPROC_ID=x\x00AGENTPROC_ID=xy"), []byte("AGENTPROC_ID=x"))
	f.Add([]byte("AGENTPROC_ID_X=1\x00AGENTPROC_ID=2"), []byte("AGENTPROC_ID="))
	f.Fuzz(func(t *testing.T, env, entry []byte) {
		if len(entry) == 0 || bytes.IndexByte(entry, 0) >= 0 {
			return // no NAME=value string is empty or holds a NUL
		}
		parts := bytes.Split(env, []byte{0})
		want := false
		for _, p := range parts {
			want = want || bytes.Equal(p, entry)
		}
		if got := HasEnvEntry(env, entry); got != want {
			t.Fatalf("HasEnvEntry(%q, %q) = %v, want %v", env, entry, got, want)
		}
		var wantValue []byte
		found := false
		for _, p := range parts {
			if v, ok := bytes.CutPrefix(p, entry); ok {
				wantValue, found = v, true
				break
			}
		}
		if v, ok := EnvValue(env, entry); ok != found || !bytes.Equal(v, wantValue) {
			t.Fatalf("EnvValue(%q, %q) = %q %v, want %q %v", env, entry, v, ok, wantValue, found)
		}
	})
}

// FuzzInCgroupLeaf compares InCgroupLeaf with a model: the third
// colon-separated field of a line ends in "/" + leaf.
func FuzzInCgroupLeaf(f *testing.F) {
	f.Add([]byte("0::/user.slice/agentproc-1\n"), "agentproc-1")
	f.Add([]byte("12:memory:/a/agentproc-1\n0::/\n"), "agentproc-1")
	f.Add([]byte("0::/a/x-agentproc-1:b\n"), "agentproc-1")
	f.Fuzz(func(t *testing.T, data []byte, leaf string) {
		want := false
		for _, line := range strings.Split(string(data), "\n") {
			if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && strings.HasSuffix(parts[2], "/"+leaf) {
				want = true
			}
		}
		if got := InCgroupLeaf(data, leaf); got != want {
			t.Fatalf("InCgroupLeaf(%q, %q) = %v, want %v", data, leaf, got, want)
		}
	})
}

// FuzzSocketInode reads back the fd link of a socket and accepts nothing
// else.
func FuzzSocketInode(f *testing.F) {
	f.Add([]byte("socket:[12345]"), uint64(12345))
	f.Add([]byte("pipe:[1]"), uint64(0))
	f.Add([]byte("socket:[]"), uint64(1)<<63)
	f.Fuzz(func(t *testing.T, link []byte, inode uint64) {
		if v, ok := SocketInode(link); ok {
			digits := strings.TrimSuffix(strings.TrimPrefix(string(link), "socket:["), "]")
			if !strings.HasPrefix(string(link), "socket:[") || !strings.HasSuffix(string(link), "]") ||
				strings.Trim(digits, "0123456789") != "" || strconv.FormatUint(v, 10) != strings.TrimLeft(digits, "0") && v != 0 {
				t.Fatalf("SocketInode(%q) = %d", link, v)
			}
		}
		built := "socket:[" + strconv.FormatUint(inode, 10) + "]"
		if v, ok := SocketInode([]byte(built)); !ok || v != inode {
			t.Fatalf("SocketInode(%q) = %d %v, want %d", built, v, ok, inode)
		}
	})
}

// FuzzParseSocketTable checks what ParseSocketTable reports from any input
// and reads back a table line built the way the kernel prints one.
func FuzzParseSocketTable(f *testing.F) {
	f.Add([]byte("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0000000000000000 100 0 0 10 0\n"),
		[]byte{127, 0, 0, 1}, uint16(8080), uint64(12345))
	f.Add([]byte("header\n 0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 7 1\n"),
		[]byte{15: 1}, uint16(80), uint64(7))
	f.Fuzz(func(t *testing.T, data, ip []byte, port uint16, inode uint64) {
		ParseSocketTable(data, TCPListen, func(ino uint64, addr netip.Addr, p int) {
			if ino == 0 || p <= 0 || p > 65535 || !addr.IsValid() || addr.Zone() != "" {
				t.Fatalf("ParseSocketTable(%q): inode %d, %v port %d", data, ino, addr, p)
			}
		})
		if len(ip) != 4 && len(ip) != 16 || port == 0 || inode == 0 {
			return
		}
		// Each 32-bit word as a number in host byte order, in hex.
		var hexAddr strings.Builder
		for i := 0; i < len(ip); i += 4 {
			fmt.Fprintf(&hexAddr, "%08X", binary.NativeEndian.Uint32(ip[i:]))
		}
		line := fmt.Sprintf("header\n   0: %s:%04X %s:0000 %s 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 100 0 0 10 0\n",
			hexAddr.String(), port, strings.Repeat("0", hexAddr.Len()), TCPListen, inode)
		want, _ := netip.AddrFromSlice(ip)
		n := 0
		ParseSocketTable([]byte(line), TCPListen, func(ino uint64, addr netip.Addr, p int) {
			n++
			if ino != inode || addr != want || p != int(port) {
				t.Fatalf("ParseSocketTable(%q) = %d %v %d, want %d %v %d", line, ino, addr, p, inode, want, port)
			}
		})
		if n != 1 {
			t.Fatalf("ParseSocketTable(%q): %d sockets, want 1", line, n)
		}
		ParseSocketTable([]byte(line), UDPBound, func(uint64, netip.Addr, int) {
			t.Fatalf("ParseSocketTable(%q, UDPBound) reported a socket in another state", line)
		})
	})
}

// FuzzParseSyscall reads back a syscall file built from its fields and
// accepts only a number followed by at least three fields.
func FuzzParseSyscall(f *testing.F) {
	f.Add([]byte("0 0x0 0x7ffd 0x1 0x0 0x0 0x0 0x7ffc 0x7f00\n"), 0, uint64(0), uint64(0x7ffd))
	f.Add([]byte("running\n"), 7, uint64(1), uint64(2))
	f.Add([]byte("-1 0x7ffc 0x7f00\n"), 232, uint64(5), uint64(1)<<63)
	f.Fuzz(func(t *testing.T, data []byte, nr int, a0, a1 uint64) {
		gotNR, _, ok := ParseSyscall(data)
		fields := bytes.Fields(data)
		if ok != (len(fields) >= 4 && isInt(fields[0])) {
			t.Fatalf("ParseSyscall(%q): ok %v", data, ok)
		}
		if ok {
			if n, _ := strconv.Atoi(string(fields[0])); gotNR != n {
				t.Fatalf("ParseSyscall(%q): nr %d, want %d", data, gotNR, n)
			}
		}
		line := fmt.Sprintf("%d %#x %#x 0x0 0x0 0x0 0x0 0x7ffc 0x7f00\n", nr, a0, a1)
		gotNR, args, ok := ParseSyscall([]byte(line))
		if !ok || gotNR != nr || args[0] != a0 || args[1] != a1 || args[2] != 0 {
			t.Fatalf("ParseSyscall(%q) = %d %x %v", line, gotNR, args, ok)
		}
	})
}

func isInt(b []byte) bool {
	_, err := strconv.Atoi(string(b))
	return err == nil
}

// FuzzKeyValue compares VMStat and StatusField with a model: the first
// line that starts with the key and its separator.
func FuzzKeyValue(f *testing.F) {
	f.Add([]byte("nr_free_pages 1\noom_kill 3\n"), "oom_kill")
	f.Add([]byte("Name:\tsh\nSeccomp:\t0\nCapEff:\t000001ffffffffff\n"), "CapEff")
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		var vm, status string
		vmFound, statusFound := false, false
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, key+" "); ok && !vmFound {
				vm, vmFound = v, true
			}
			if v, ok := strings.CutPrefix(line, key+":"); ok && !statusFound {
				status, statusFound = strings.TrimSpace(v), true
			}
		}
		n, err := strconv.ParseUint(strings.TrimSpace(vm), 10, 64)
		if got, ok := VMStat(data, key); ok != (vmFound && err == nil) || ok && got != n {
			t.Fatalf("VMStat(%q, %q) = %d %v, want %d %v", data, key, got, ok, n, vmFound && err == nil)
		}
		if got, ok := StatusField(data, key); ok != statusFound || string(got) != status {
			t.Fatalf("StatusField(%q, %q) = %q %v, want %q %v", data, key, got, ok, status, statusFound)
		}
	})
}

// FuzzParseMountinfo never fails on what it is given, and every mount it
// reports has the fields a line must have.
func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n40 22 0:30 / /mnt/a\\040b ro - tmpfs\n"))
	f.Add([]byte("41 22 0:31 / /cut rw\n - x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseMountinfo(data, func(m Mount) {
			if m.FSType == "" || m.Point == "" || m.Root == "" {
				t.Fatalf("ParseMountinfo(%q): got %+v, want a root, a mount point and a type", data, m)
			}
		})
	})
}
