// Package httpapi serves an agentproc.Manager over HTTP with JSON, and
// provides a Client for it.
//
// The request and reply shapes of start, list, output and signal follow the
// process API of Coder's workspace agent: the same field names, the same
// error body {"message", "detail"}, the same status codes for the same
// mistakes. Fields this package adds are extensions that are omitted when
// empty. Times are Unix seconds. For Coder's behaviour too (chat scoping,
// client tokens, its list order, exit codes and output markers), use
// WithCoderCompat.
//
// Routes, relative to where the handler is mounted:
//
//	POST /start            {"command", "workdir", "env", "background", "timeout",
//	                        "key", "stdin", "tty": {"rows", "cols"},
//	                        "limits": {"memory_bytes", "procs", "cpu"},
//	                        "idle_timeout", "idle_interactive", "max_output_bytes",
//	                        "ready": {"port", "match"}}
//	                       -> {"id", "started", "command", "background", "warnings"}
//	GET  /list             -> {"processes": [Process...]}
//	GET  /{id}             -> Process
//	DELETE /{id}           -> {"message"}: forget an exited process and its
//	                       output (agentproc.Scope.Remove); 409 while it runs
//	GET  /{id}/output      -> {"output", "truncated", "running", "exit_code",
//	                           "reason", "signal", "match", "timed_out", "port",
//	                           "awaiting_input"}
//	     ?wait=true        block until the process exits (at most the
//	                       server's cap, WithMaxWait)
//	     ?wait_for=REGEX   block until a line of output matches (RE2 syntax,
//	                       at most 1,000 instructions once compiled)
//	     ?wait_port=N      block until the process's tree listens on port N
//	                       (0: any port); "port" is the socket found
//	     ?plain=true       terminal-clean text (agentproc.PlainText); wait_for
//	                       then matches rendered lines
//	     ?timeout=10s      bound a blocking wait further
//	     ?offset=N         read from absolute offset N instead of taking a
//	                       snapshot; adds "offset", "next", "omitted", "eof"
//	                       (agentproc.Chunk), and "output" is the chunk's data
//	     ?follow=true      with offset: block until there is output after it,
//	                       the process exits or awaits input (WaitOutput)
//	     ?since=RFC3339    read from the output written at or after that
//	                       time (agentproc.Process.OffsetAt: coarse, may
//	                       begin up to a mark's worth earlier), as offset
//	                       does; with offset, the later of the two
//	POST /{id}/signal      {"signal": "kill" | "terminate" | "interrupt"}
//	                       -> {"message"}
//	POST /{id}/stdin       {"data", "close"} -> {"written"}; the process
//	                       must have been started with "stdin" or "tty"
//	POST /stop-all         {} -> {"processes": [Process...]}: every running
//	                       process of the caller's owner, stopped at once
//	POST /prune            {} -> {"processes": [Process...]}: every exited
//	                       process of the caller's owner, removed
//	GET  /events           Server-Sent Events of the caller's processes:
//	                       "id: SEQ", "event: started|ready|awaiting_input|
//	                       exited|dropped|lost", "data: Event" (agentproc.Event in this API's shape);
//	                       resume with Last-Event-ID (or ?after=SEQ) within
//	                       the Manager's last agentproc.EventBuffer events
//
// With WithUI, also:
//
//	GET  /                 the web page (and its files under /ui/)
//	GET  /ui/events        GET /events preceded by a "snapshot" event of the
//	                       caller's processes, with "info" events when a
//	                       running process's ports or input state change
//	                       and "usage" events of their CPU time and memory;
//	                       ?usage=0 (a hidden page): no usage read
//	GET  /ui/output        ?id=ID&offset=N: the output as "output" events,
//	                       rendered lines and the unfinished line apart, as
//	                       it is written, until the exit
//	POST /ui/stop          {"id"} -> Process: stop (terminate, then kill
//	                       after the grace period) and its final state
//
// A Process is {"id", "command", "workdir", "background", "running",
// "exit_code", "started_at_unix", "exited_at_unix", "pid", "reason",
// "signal", "warnings", "denials", "limits", "peak_memory_bytes", "cpu_time_ms",
// "likely_oom", "owner", "ports", "awaiting_input", "ready"}. Its reason
// is one of "exited", "signaled", "killed", "shutdown", "timeout", "oom",
// "idle" and "output_limit".
//
// Safety: whoever can POST /start runs commands as the agent's user, so
// NewHandler logs a warning when no WithAuthorize hook is set, and every
// handler refuses, with 403, state-changing requests a browser marks as
// cross-origin (net/http.CrossOriginProtection; WithTrustedOrigins) and
// requests whose Host is not served here (DNS rebinding; see
// WithAllowedHosts for the rule), and, with 415, bodies of POST routes not
// sent as application/json.
//
// Status codes: 400 for a malformed body or query and for a request the
// Manager rejects; 401 when the WithAuthorize hook finds no identity; 403
// for a cross-origin browser request or a Host not served; 404 for
// an ID the caller cannot see (unknown, dropped by retention, or another
// owner's: the three are indistinguishable); 409 for a signal to a process
// that has exited and for removing one that runs; 413 for a body over
// MaxBodyBytes; 415 for a POST body not sent as application/json; 429 when the Manager's running limit or the
// owner's (WithMaxRunningPerOwner) is reached; 501 for what the platform
// cannot do, such as a limit that cannot be enforced (the detail names the
// field); 503 once the Manager is closed.
//
// Ownership: each request acts for one owner, taken from a header or decided
// by a hook (see NewHandler), and sees only that owner's processes.
//
// Blocking waits hold the connection: the handler extends the connection's
// write deadline past the wait (http.ResponseController), and a client that
// disconnects ends its wait at once.
package httpapi
