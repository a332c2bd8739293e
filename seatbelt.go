package agentproc

import (
	"strconv"
	"strings"
)

// seatbeltProfile writes the macOS Seatbelt profile (SBPL, the language of
// sandbox-exec(1)) that enforces pol. It is portable code so that its
// golden tests (testdata/seatbelt) run everywhere; only sandbox_darwin.go
// runs it. It is unverified: it has never run on a Mac in this project's
// tests, which is why docs/sandbox.md says so.
//
// The profile denies by default and then allows: running programs, what a
// shell and its tools need from the system (sysctl reads, the system's
// Mach services for user and host lookups, the standard devices), reading
// (everything, or pol.read and the system directories), writing in
// pol.write, and the network pol allows. Hidden and read-only paths are
// denied after the allows: in SBPL a later rule that matches wins.
func seatbeltProfile(pol *sandboxPolicy) string {
	var b strings.Builder
	line := func(s ...string) {
		b.WriteString(strings.Join(s, " "))
		b.WriteByte('\n')
	}
	paths := func(op, kind string, ps []string) {
		if len(ps) == 0 {
			return
		}
		b.WriteString("(" + op)
		for _, p := range ps {
			b.WriteString("\n  (" + kind + " " + sbplString(p) + ")")
		}
		b.WriteString(")\n")
	}
	line("(version 1)")
	line("(deny default)")
	line(";; processes: run programs, see and signal only this sandbox's")
	line("(allow process-exec process-fork)")
	line("(allow process-info* (target same-sandbox))")
	line("(allow signal (target same-sandbox))")
	line(";; what a shell and its tools need from the system")
	line("(allow sysctl-read)")
	line("(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\")",
		"(global-name \"com.apple.system.notification_center\")",
		"(global-name \"com.apple.system.logger\")",
		"(global-name \"com.apple.coreservices.launchservicesd\"))")
	line("(allow ipc-posix-shm-read-data ipc-posix-sem)")
	line("(allow file-read-metadata)")
	line("(allow file-ioctl (literal \"/dev/tty\") (regex #\"^/dev/ttys[0-9]+$\"))")
	line("(allow file-read* file-write-data",
		"(literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/tty\")",
		"(literal \"/dev/random\") (literal \"/dev/urandom\") (literal \"/dev/dtracehelper\"))")
	if pol.tty {
		line(";; the tree's own terminal (its descriptors are inherited; reopening by name)")
		line("(allow file-read* file-write-data (regex #\"^/dev/ttys[0-9]+$\"))")
	}
	line(";; reading")
	if pol.read == nil {
		line("(allow file-read*)")
	} else {
		sys := []string{"/bin", "/sbin", "/usr", "/System", "/Library", "/private/etc", "/etc", "/private/var/db/timezone", "/opt/homebrew", "/dev/fd"}
		if pol.shell != "" {
			sys = append(sys, pol.shell)
		}
		paths("allow file-read*", "subpath", append(sys, pol.read...))
		line("(allow file-read-data (literal \"/\"))")
	}
	line(";; writing")
	paths("allow file-read* file-write*", "subpath", pol.write)
	if len(pol.hide) > 0 {
		line(";; hidden, even below a readable or writable directory")
		paths("deny file-read* file-write*", "subpath", pol.hide)
	}
	if len(pol.readOnly) > 0 {
		line(";; read-only below a writable directory")
		paths("deny file-write*", "subpath", pol.readOnly)
	}
	line(";; network: " + string(pol.network))
	switch pol.network {
	case NetworkHost:
		line("(allow network* system-socket)")
	case NetworkPorts:
		b.WriteString("(allow network-outbound")
		for _, p := range pol.ports {
			b.WriteString("\n  (remote tcp \"*:" + strconv.Itoa(p) + "\")")
		}
		b.WriteString(")\n")
		line("(allow system-socket)")
	}
	return b.String()
}

// sbplString quotes s as an SBPL string literal.
func sbplString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
