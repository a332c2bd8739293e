// Package procfs reads Linux's /proc for agentproc: where its files are,
// how to read many of them cheaply (Scanner), and what their formats mean
// (the Parse functions, which take the bytes of a file and are fuzzed). It
// knows nothing of what agentproc looks for there: the marker protocol,
// snapshot coalescing and containment policy stay in the root package.
//
// It is the one place that names /proc: a test fails on a "/proc" path
// literal in any other non-test Go file of the module.
//
// Every read here is a system call on a pseudo-file that can be slow on a
// busy host: none may run under a caller's lock.
//
// Linux only, except the parsers: elsewhere the package holds just those,
// and agentproc never calls it.
package procfs
