// Package confine is the Linux confinement mechanism of agentproc's
// sandbox: the Landlock rules, the seccomp filter and its rows of rules per
// network mode, the network and mount namespaces, and the capability drop.
// It takes plain data (paths, ports, a row of rules) and knows nothing of
// agentproc's Sandbox: the root package keeps Sandbox, its checks (InWrite,
// Narrow, the resolution of paths) and their errors, and translates a
// Sandbox into what this package applies, as it does for limits with
// internal/cgroup.
//
// Each function that changes the calling thread (joining a namespace,
// dropping capabilities, Landlock's restrict_self, installing the filter)
// acts on that thread only, which the caller has locked and throws away
// after the fork (internal/osthread).
//
// Linux only: elsewhere the package is empty and agentproc never calls it.
package confine
