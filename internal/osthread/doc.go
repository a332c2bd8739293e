// Package osthread is the one home of work done on a locked OS thread: the
// state the kernel keeps per thread (namespaces, a Landlock domain, a
// seccomp filter, no_new_privs, capabilities, cgroup v1 membership) is
// changed on a thread of its own, a child is forked from it, and the thread
// is then either thrown away or given back to the scheduler once restored.
//
// Three kinds of thread, one rule:
//
//   - Throwaway runs work on a thread that is discarded afterwards (its
//     goroutine exits still locked, and the runtime ends the thread).
//   - Restored runs a step, the work and the step's undoing on a locked
//     thread, and gives the thread back only when the undoing succeeded.
//   - Spare makes a thread ahead, prepared, that waits for the one piece
//     of work it serves and is then discarded.
//
// The rule: the main thread is never changed. The runtime never ends it
// (and on some platforms it is what the process is), so work that lands
// there is handed to another thread, and the main thread, untouched, is
// kept out of later calls' way while a user holds it (HoldMain).
//
// Linux only: elsewhere the package is empty and agentproc never calls it.
package osthread
