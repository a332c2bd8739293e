// Package agentproc supervises the shell commands an agent runs on behalf of
// a model.
//
// A Manager starts each command under a shell (sh -c on Unix, cmd.exe /d /s /c
// on Windows) in its own session and process group (Unix) or Job Object
// (Windows), captures stdout and stderr together into a bounded head-plus-tail
// buffer, records the
// exit, reaps old entries, and stops every process it started when it is
// closed. Waits block on channels, never on a poll timer, and every call
// that can block takes a context first and returns ctx.Err() when it ends
// (Close, the io.Closer form of Shutdown, is the one deliberate exception).
//
//	m := agentproc.New()
//	defer m.Close()
//	p, err := m.Start(ctx, agentproc.Request{Command: "go test ./..."})
//	if err != nil { ... }
//	info, err := p.Wait(ctx)
//	out := p.Output() // head + marker + tail when the output was large
//
// Output can also be followed by absolute byte offset: Read returns what is
// retained after an offset, WaitOutput blocks until there is more, and
// WaitMatch waits for a line matching a regular expression (a server's
// "ready"). Nothing is drained by reading, so several readers never disturb
// each other.
//
// Every child carries AGENTPROC_ID=<its ID> in its environment. On Linux the
// stop paths also find and kill descendants that left the process group
// (setsid, double forks) by that marker, or, with WithCgroup, by their cgroup
// v2. Request.Timeout bounds a command's life; Request.Key makes a retried
// Start attach to the process it already started.
//
// Scopes give each owner (a chat, a user) a view that sees only its own
// processes. A non-zero exit code is process state, reported in Info, not an
// error.
//
// All time goes through a quartz.Clock (WithClock), so retention and grace
// periods are testable with a mock clock.
//
// Importing the package has one side effect, on Linux only: an init
// function that turns a copy of the program this package re-executed (the
// host guard of WithStateDir, the runner of a Request.Detach) into that
// role before main runs. In any other process it only reads the
// environment.
//
// # For maintainers
//
// docs/architecture.md maps the files and states, once, the rules that span
// them: the lock rule and the lock order. The per-OS layer is listed in
// platform.go. CONTRIBUTING.md says where each rule lives and how to run
// every test tier.
package agentproc
