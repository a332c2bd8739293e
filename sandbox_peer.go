package agentproc

// MoreConfined reports whether the process pid is confined in a way the
// calling process is not, and how (one line naming what differs; "" when
// nothing does). It is what a server that runs commands unconfined for the
// local processes that reach it (agentproc serve on its Unix socket, with
// the peer's PID from SO_PEERCRED) checks first, so that a sandboxed tree
// cannot have it run what its own sandbox refuses.
//
// It looks only at what a confined process cannot undo, so a tree cannot
// forge its way past it: more seccomp filters than the caller's (a filter
// is inherited by every child and never removed), no_new_privs where the
// caller has none (never unset), a smaller capability bounding set, and a
// namespace other than the caller's (leaving one needs capabilities a
// sandboxed tree does not have); and the hard core-dump limit of 1 byte
// every sandboxed tree starts with where Yama allows it (raising a hard
// limit takes CAP_SYS_RESOURCE): agentproc's own mark, which holds where
// the caller runs under filters of its own and a tree of another Manager
// has no more than it. A Sandbox of any Manager has at least
// no_new_privs and, where it runs (Linux), a seccomp filter. The marker
// (MarkerEnv) is not used: a tree can exec with an environment of its
// choosing. Other confinement counts too (a container, another tool's
// sandbox): a process its own sandbox holds is refused for the same reason.
// A process whose details cannot be read (gone, or unreadable to the
// caller) is reported as confined, with the reason.
//
// Linux only; elsewhere it returns ErrUnsupported.
func MoreConfined(pid int) (string, error) { return moreConfined(pid) }
