package agentproc

import (
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/agentproc/agentproc/internal/procfs"
)

// peerNamespaces are the namespaces MoreConfined compares; time and the
// *_for_children links say nothing of the process itself.
var peerNamespaces = []string{"mnt", "net", "user", "pid", "ipc", "uts", "cgroup"}

func moreConfined(pid int) (string, error) {
	if pid <= 0 {
		return "process " + strconv.Itoa(pid) + " is not a process", nil
	}
	start, _, ok := procfs.StartTime(pid)
	if !ok {
		return "process " + strconv.Itoa(pid) + " is gone", nil
	}
	why := confinedBeyondSelf(pid)
	// The PID named the same process throughout (not one that reused it).
	if again, _, ok := procfs.StartTime(pid); !ok || again != start {
		return "process " + strconv.Itoa(pid) + " is gone", nil
	}
	return why, nil
}

// confinedBeyondSelf is moreConfined's comparison, "" when pid is
// confined no more than this process.
func confinedBeyondSelf(pid int) string {
	peer, err := os.ReadFile(procfs.PIDFile(pid, "status"))
	if err != nil {
		return "its status is unreadable: " + err.Error()
	}
	self, err := procfs.ReadSelf("status")
	if err != nil {
		return "this process's status is unreadable: " + err.Error()
	}
	number := func(status []byte, name string, base int) (uint64, bool) {
		v, ok := procfs.StatusField(status, name)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseUint(string(v), base, 64)
		return n, err == nil
	}
	// Seccomp_filters (Linux 5.9) counts the filters; before it, Seccomp
	// says 2 for filter mode.
	for _, f := range []string{"Seccomp_filters", "Seccomp", "NoNewPrivs"} {
		p, okP := number(peer, f, 10)
		s, okS := number(self, f, 10)
		if okP != okS {
			return f + " reads differently in its status and this process's"
		}
		if okP && p > s {
			return f + " " + strconv.FormatUint(p, 10) + " (this process: " + strconv.FormatUint(s, 10) + ")"
		}
	}
	if p, okP := number(peer, "CapBnd", 16); okP {
		if s, _ := number(self, "CapBnd", 16); s&^p != 0 {
			return "a smaller capability bounding set"
		}
	}
	for _, ns := range peerNamespaces {
		mine, err := os.Readlink(procfs.SelfFile("ns/" + ns))
		if err != nil {
			continue // a namespace this kernel does not have
		}
		theirs, err := os.Readlink(procfs.PIDFile(pid, "ns/"+ns))
		if err != nil {
			return "its " + ns + " namespace is unreadable: " + err.Error()
		}
		if mine != theirs {
			return "another " + ns + " namespace"
		}
	}
	return sandboxCoreMark(pid, peer)
}

// sandboxCoreMark returns why pid carries the core-dump limit every
// sandboxed tree starts with (treeCoreLimit as the hard RLIMIT_CORE,
// startNoCore) while this process does not; "" otherwise. Raising a hard
// limit takes CAP_SYS_RESOURCE, which no tree has, and /proc/PID/limits is
// readable by every user; a tree may lower it (to 0), so any hard limit up
// to treeCoreLimit counts where this process's is above it. Unlike the
// counts above it is agentproc's own mark, so it holds where this process
// runs under filters of its own (a systemd unit's NoNewPrivileges= and
// SystemCallFilter=): a tree of another, unhardened Manager has no more
// filters than such a server (seventh attack review,
// TestAttackServeHardenedPeerCount). Where Yama refuses PTRACE_TRACEME no
// tree has the mark, and where this process's own hard limit is 0 or 1
// (LimitCORE=0) it tells nothing: the counts are all there. The mark counts
// only with no_new_privs and a seccomp filter in the peer's status (every
// sandboxed tree has both, and can shed neither): a user's shell with
// `ulimit -c 0` (which sets the hard limit too) or a login under
// limits.conf's `* hard core 0` has the same limit and no sandbox, and
// was refused (eighth attack review, TestAttackServeRefusesUserCoreLimitZero).
func sandboxCoreMark(pid int, status []byte) string {
	if nnp, _ := procfs.StatusField(status, "NoNewPrivs"); string(nnp) != "1" {
		return ""
	}
	if mode, _ := procfs.StatusField(status, "Seccomp"); string(mode) != "2" {
		return ""
	}
	self, ok := hardCoreLimit(procfs.SelfFile("limits"))
	if !ok || self <= treeCoreLimit {
		return ""
	}
	peer, ok := hardCoreLimit(procfs.PIDFile(pid, "limits"))
	if !ok || peer > treeCoreLimit {
		return ""
	}
	shown := "unlimited"
	if self != math.MaxUint64 {
		shown = strconv.FormatUint(self, 10)
	}
	return "a hard core-dump limit of " + strconv.FormatUint(peer, 10) + " bytes, as an agentproc sandbox sets (this process: " + shown + ")"
}

// hardCoreLimit reads the hard "Max core file size" of a /proc/PID/limits
// file; "unlimited" reads as the largest value.
func hardCoreLimit(path string) (uint64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "Max core file size")
		if !ok {
			continue
		}
		f := strings.Fields(rest) // soft, hard, units
		if len(f) < 2 {
			return 0, false
		}
		if f[1] == "unlimited" {
			return math.MaxUint64, true
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		return n, err == nil
	}
	return 0, false
}
