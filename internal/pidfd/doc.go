// Package pidfd is the one implementation of the PID-reuse-safe kill
// protocol that every agentproc kill sweep uses (the containment's escapee
// sweep, the orphan killer of a dead Manager's trees, the cgroup v1 kill
// and the pinning of a detached process's leader): a process found by PID
// is first pinned with a pidfd, then checked again to be the one wanted
// (its marker, its cgroup, its start time), and only then signalled,
// through the pidfd. If the PID was reused before the pidfd was opened, the
// check fails on the newcomer; if after, the pidfd names the dead original
// and the signal goes nowhere. When no pidfd can be had (a kernel before
// 5.3, a seccomp profile that denies pidfd_open), the check is made
// immediately before a plain kill with nothing in between but the kill
// itself; a PID is never signalled because it was found earlier.
//
// Linux only: elsewhere the package is empty and agentproc never calls it.
package pidfd
