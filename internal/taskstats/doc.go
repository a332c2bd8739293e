// Package taskstats follows the kernel's exit accounting records (the
// generic netlink family TASKSTATS) to learn what a process tree's own
// processes used at their peak, which no rusage of a child started by Go
// can say: Go starts a child with clone(CLONE_VM|CLONE_VFORK), so until
// its exec the child runs on the host's memory, and exec folds the host's
// high-water mark into the child's ru_maxrss for good.
//
// Each exit record is sent from do_exit before the exiting task's memory
// is released (taskstats_exit precedes exit_mm in kernel/exit.c), and it
// carries that memory's own high-water mark (hiwater_rss, filled by
// xacct_add_tsk), the exiting PID, its thread group and its parent at
// that moment. A Listener registers for the exits of every CPU
// (TASKSTATS_CMD_ATTR_REGISTER_CPUMASK) and folds each record into its
// parent's, so that when a child of this process exits its record holds
// the largest mark of it and of every descendant it reaped: the same
// processes its ru_maxrss covers, without the host's memory.
//
// Registering needs CAP_NET_ADMIN (the family's command is
// GENL_ADMIN_PERM), the initial user namespace and the initial PID
// namespace (add_del_listener refuses others); Open fails elsewhere, and
// the caller keeps what it knew without it. The record's own mark needs
// CONFIG_TASK_XACCT; a record without one (0) is not taken as a peak.
//
// The cost is one record read per exit on the whole machine while a
// Listener is registered: from a Mark until lingerDelay after the last
// Done, so that an idle host receives nothing; see docs/benchmarks.md.
package taskstats
