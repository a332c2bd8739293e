// Package cgroup puts one agentproc process tree into cgroups of its own and
// holds it to its limits there. It knows both cgroup versions: a v2
// directory (created with the leader inside through CLONE_INTO_CGROUP), and
// on hosts that still bind controllers to v1 hierarchies a directory in each
// hierarchy a limit needs (entered by thread placement, see EnterThread). A
// hybrid host gets both: the limits from v1, cgroup.kill and cgroup.events
// from a v2 directory without controllers.
//
// The API a Group offers is the same whichever backend holds it: New, then
// EnterThread around the start on a locked OS thread, Started, and for the
// rest of the tree's life Members, Kill, WaitEmpty, Usage, OOMKills and
// Remove. Each backend (v2Dir, v1Set) implements the small backend
// interface that Group combines.
//
// Linux only: elsewhere the package is empty and agentproc never calls it.
package cgroup
