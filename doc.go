// Package agentproc supervises the shell commands an agent runs on behalf of
// a model.
//
// A Manager starts each command under a shell (sh -c on Unix, cmd.exe /d /s /c
// on Windows) in its own process group (Unix) or Job Object (Windows), captures
// stdout and stderr together into a bounded head-plus-tail buffer, records the
// exit, reaps old entries, and stops every process it started when it is
// closed. Waits block on channels, never on a poll timer, and every blocking
// call takes a context.
//
//	m := agentproc.New()
//	defer m.Close()
//	p, err := m.Start(agentproc.Request{Command: "go test ./..."})
//	if err != nil { ... }
//	info, err := p.Wait(ctx)
//	out := p.Output() // head + marker + tail when the output was large
//
// Scopes give each owner (a chat, a user) a view that sees only its own
// processes. A non-zero exit code is process state, reported in Info, not an
// error.
//
// All time goes through a quartz.Clock (WithClock), so retention and grace
// periods are testable with a mock clock.
package agentproc
