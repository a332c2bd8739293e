package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/agentproc/agentproc"
)

// The JSON shapes of the routes. Field names and meanings follow the process
// API of Coder's workspace agent (codersdk/workspacesdk), so a client written
// for that API works against this one; fields marked as extensions are added
// here and are omitted when they have nothing to say, so such a client never
// sees a value it does not expect.

// StartRequest is the body of POST /start.
type StartRequest struct {
	// Command runs under the Manager's shell; see agentproc.Request.
	Command string `json:"command"`
	// WorkDir is the working directory; "" means the Manager's default.
	WorkDir string `json:"workdir,omitempty"`
	// Env is applied over the Manager's environment.
	Env map[string]string `json:"env,omitempty"`
	// Background marks a command meant to keep running, such as a server.
	Background bool `json:"background,omitempty"`

	// Extension: an idempotency key (agentproc.Request.Key) in the
	// caller's owner namespace: while the process a start with this key
	// began is retained, the same request gets that process again, with
	// started false, and a different one is 409. "" means none.
	Key string `json:"key,omitempty"`
	// Extension: give the process a stdin pipe to write with
	// POST /{id}/stdin; false gives it the null device.
	Stdin bool `json:"stdin,omitempty"`
	// Extension: run the process under a pseudo-terminal of this size
	// (Unix only; 501 elsewhere), which is also its writable stdin.
	TTY *agentproc.TTYSize `json:"tty,omitempty"`
	// Extension: how long the command may run, as a Go duration such as
	// "30s"; when it passes the process is stopped (agentproc.Request
	// Timeout). "" means no limit.
	Timeout string `json:"timeout,omitempty"`
	// Extension: when the process counts as ready (agentproc.ReadyCheck):
	// {"port": N} for a listening port (0: any), {"match": REGEX} for a
	// line of output. GET /events then carries a "ready" event.
	Ready *agentproc.ReadyCheck `json:"ready,omitempty"`
	// Extension: limits on the memory, processes and CPU of the whole tree
	// (agentproc.Limits): {"memory_bytes", "procs", "cpu"}. A limit the
	// server cannot enforce is a 501 naming the field.
	Limits *agentproc.Limits `json:"limits,omitempty"`
	// Extension: stop the process once it has written nothing for this
	// long, as a Go duration such as "10m" (agentproc.Request IdleTimeout).
	// "" means no limit.
	IdleTimeout string `json:"idle_timeout,omitempty"`
	// Extension: let idle_timeout apply to a process with stdin or tty,
	// which may be waiting for input (agentproc.Request IdleInteractive).
	IdleInteractive bool `json:"idle_interactive,omitempty"`
	// Extension: stop the process once its output passes this many bytes
	// (agentproc.Request MaxOutput). 0 means no limit.
	MaxOutput int64 `json:"max_output_bytes,omitempty"`
	// Extension: confine the process (see Sandbox); it can only narrow
	// the server's policy.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
}

// StartResponse is the reply to POST /start.
type StartResponse struct {
	ID string `json:"id"`
	// Started is true when this request started the process, false when
	// its Key named a process already started, which ID names.
	Started bool `json:"started"`

	// Extension: the command as it runs. It differs from the request's
	// when the Manager's background detection removed a trailing "&".
	Command string `json:"command"`
	// Extension: whether the process runs as a background process, either
	// because the request said so or because of a trailing "&".
	Background bool `json:"background"`
	// Extension: advice about the command (agentproc.Info.Warnings).
	Warnings []string `json:"warnings,omitempty"`
}

// ListResponse is the reply to GET /list: the caller's processes, running
// ones first, each group newest first.
type ListResponse struct {
	Processes []Process `json:"processes"`
}

// Process describes one process: the reply to GET /{id} and an element of
// ListResponse.
type Process struct {
	ID         string `json:"id"`
	Command    string `json:"command"`
	WorkDir    string `json:"workdir,omitempty"`
	Background bool   `json:"background"`
	Running    bool   `json:"running"`
	// ExitCode is absent while the process runs.
	ExitCode *int `json:"exit_code,omitempty"`
	// StartedAt and ExitedAt are Unix times in seconds; ExitedAt is absent
	// while the process runs.
	StartedAt int64  `json:"started_at_unix"`
	ExitedAt  *int64 `json:"exited_at_unix,omitempty"`

	// Extension: the process ID of the shell.
	PID int `json:"pid,omitempty"`
	// Extension: why the process ended (agentproc.ExitReason): "exited",
	// "signaled", "killed", "shutdown", "timeout", "oom" (the kernel's OOM
	// killer, under limits.memory_bytes), "idle" (idle_timeout) or
	// "output_limit" (max_output_bytes); absent while it runs.
	Reason agentproc.ExitReason `json:"reason,omitempty"`
	// Extension: the signal that ended the process, such as "SIGKILL".
	Signal string `json:"signal,omitempty"`
	// Extension: advice about the command (agentproc.Info.Warnings).
	Warnings []string `json:"warnings,omitempty"`
	// Extension: what the sandbox refused the tree (agentproc.Info.Denials),
	// each with the smallest change that would allow it; always present,
	// [] when nothing was refused.
	Denials []Denial `json:"denials"`
	// Extension: the sockets the process's tree listens on
	// (agentproc.Info.Ports).
	Ports []agentproc.Port `json:"ports,omitempty"`
	// Extension: a process of the tree is blocked reading its stdin and
	// the tree has been quiet (agentproc.Info.AwaitingInput).
	AwaitingInput bool `json:"awaiting_input,omitempty"`
	// Extension: the start request's ready check has passed.
	Ready bool `json:"ready,omitempty"`
	// Extension: the limits the process runs under (agentproc.Info.Limits).
	Limits *agentproc.Limits `json:"limits,omitempty"`
	// Extension: for a process that has exited, its peak memory in bytes
	// where known (agentproc.Info.MaxRSS): its whole tree's with a cgroup,
	// the shell's and its waited-for children's otherwise, and absent where
	// that cannot be told from the host's own memory.
	PeakMemory int64 `json:"peak_memory_bytes,omitempty"`
	// Extension: for a process that has exited, the CPU time (user plus
	// system) it used, in milliseconds (agentproc.Info.CPUTime); absent
	// while it runs.
	CPUTimeMS *int64 `json:"cpu_time_ms,omitempty"`
	// Extension: the owner the process was started for; absent for "".
	Owner string `json:"owner,omitempty"`
	// Extension: a SIGKILL nobody here sent ended the process while the
	// host's OOM kill count rose: probably, not certainly, out of memory
	// (agentproc.Info.LikelyOOM).
	LikelyOOM bool `json:"likely_oom,omitempty"`
	// Extension: how the process is confined (agentproc.Info.Sandbox);
	// absent when it is not.
	Sandbox *SandboxInfo `json:"sandbox,omitempty"`
	// Extension: how many secret values were replaced by
	// "[redacted:NAME]" in the output (agentproc.Info.Redactions).
	Redactions int `json:"redactions,omitempty"`
}

// Output is the reply to GET /{id}/output.
//
// Without an offset query parameter Output is a snapshot: Output holds the
// whole retained output (head, an omission marker, tail) and Truncated says
// what was left out. With ?offset=N it is one read from absolute offset N,
// an agentproc.Chunk: Output holds the chunk's data and Position is set.
type Output struct {
	Output string `json:"output"`
	// Truncated is absent when Output is the whole output unchanged.
	Truncated *agentproc.Truncation `json:"truncated,omitempty"`
	Running   bool                  `json:"running"`
	// ExitCode is absent while the process runs.
	ExitCode *int `json:"exit_code,omitempty"`

	// Extension: why the process ended; absent while it runs.
	Reason agentproc.ExitReason `json:"reason,omitempty"`
	// Extension: the signal that ended the process, such as "SIGKILL".
	Signal string `json:"signal,omitempty"`
	// Extension: the line that matched ?wait_for, without its line ending.
	// A match of an empty line is told only by running true and timed_out
	// absent.
	Match string `json:"match,omitempty"`
	// Extension: a blocking wait (?wait=true or ?wait_for) ended because its
	// timeout or the server's cap expired while the process was still
	// running.
	TimedOut bool `json:"timed_out,omitempty"`
	// Extension: the socket ?wait_port found.
	Port *agentproc.Port `json:"port,omitempty"`
	// Extension: the process is waiting for input (answer with
	// POST /{id}/stdin); see Process.
	AwaitingInput bool `json:"awaiting_input,omitempty"`
	// Extension: with ?offset only, where the read lies in the output.
	*Position
}

// Position places the Output of a read from ?offset=N in the process's
// output. Its fields mean what agentproc.Chunk's do: pass Next as the offset
// of the following read to get only output written since.
type Position struct {
	Offset  int64 `json:"offset"`
	Next    int64 `json:"next"`
	Omitted int64 `json:"omitted"`
	EOF     bool  `json:"eof"`
}

// SignalRequest is the body of POST /{id}/signal.
type SignalRequest struct {
	// Signal is "kill", "terminate" or "interrupt" (an extension).
	Signal agentproc.Signal `json:"signal"`
}

// Response is the body of a successful reply that carries no data, such as
// the reply to POST /{id}/signal.
type Response struct {
	Message string `json:"message"`
}

// Error is the body of every error reply, and the error the Client returns
// for one. Branch on StatusCode:
//
//   - 400: the request is malformed (bad JSON, empty command, unknown signal,
//     invalid query parameter) or the Manager rejected it
//     (agentproc.ErrInvalidRequest).
//   - 401: the WithAuthorize hook found no identity.
//   - 403: a browser sent the request from another origin, or its Host is
//     not one the handler serves (see WithAllowedHosts).
//   - 404: no process with that ID is visible to the caller: it never
//     existed, retention dropped it, or another owner started it.
//   - 409: the process is not in a state that allows the request, such as a
//     signal to a process that has exited, or the start request's key was
//     used by a different request (agentproc.ErrKeyConflict).
//   - 413: the request body is larger than MaxBodyBytes.
//   - 415: a POST body was not sent as application/json.
//   - 429: the Manager's WithMaxRunning limit, or the owner's
//     WithMaxRunningPerOwner limit, is reached.
//   - 501: the platform lacks what the request needs, such as a terminal
//     on Windows or a cgroup without cgroup v2 (agentproc.ErrUnsupported,
//     or any errors.ErrUnsupported).
//   - 503: the Manager is closed.
//   - 500: anything else; Detail says what.
type Error struct {
	// StatusCode is the HTTP status of the reply. It is not part of the
	// JSON body.
	StatusCode int `json:"-"`
	// Message is a sentence meant for people and models.
	Message string `json:"message"`
	// Detail is the underlying error text, when there is one.
	Detail string `json:"detail,omitempty"`
}

// Error implements error.
func (e *Error) Error() string {
	msg := fmt.Sprintf("httpapi: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// Event is the data of one GET /events block: an agentproc.Event with the
// process in this API's shape (Process), since agentproc.Info is the
// library's value and no wire format.
type Event struct {
	Seq   uint64              `json:"seq"`
	Type  agentproc.EventType `json:"type"`
	ID    string              `json:"id,omitempty"`
	Owner string              `json:"owner,omitempty"`
	Time  time.Time           `json:"time"`
	// Info is set for started and exited events.
	Info *Process `json:"info,omitempty"`
	// Port is set for a ready event caused by a listening port.
	Port *agentproc.Port `json:"port,omitempty"`
	// Line is the matching line of a ready event, or the prompt of an
	// awaiting_input event.
	Line string `json:"line,omitempty"`
	// Lost is how many events a lost event stands for.
	Lost uint64 `json:"lost,omitempty"`
	// Denial is set for a denied event: what the sandbox refused.
	Denial *Denial `json:"denial,omitempty"`
}

// eventFromCore converts the library's event to the wire one.
func eventFromCore(e agentproc.Event) Event {
	w := Event{Seq: e.Seq, Type: e.Type, ID: e.ID, Owner: e.Owner, Time: e.Time, Port: e.Port, Line: e.Line, Lost: e.Lost}
	if e.Denial != nil {
		d := denialsFromInfo([]agentproc.Denial{*e.Denial})[0]
		w.Denial = &d
	}
	if e.Info != nil {
		p := processFromInfo(*e.Info)
		w.Info = &p
	}
	return w
}

// processFromInfo converts the library's view of a process to the wire one.
func processFromInfo(info agentproc.Info) Process {
	p := Process{
		ID:         info.ID,
		Command:    info.Command,
		WorkDir:    info.WorkDir,
		Background: info.Background,
		Running:    info.Running,
		ExitCode:   info.ExitCode,
		StartedAt:  info.StartedAt.Unix(),
		PID:        info.PID,
		Reason:     info.Reason,
		Signal:     info.ExitSignal,
		Warnings:   info.Warnings,
		LikelyOOM:  info.LikelyOOM,
		Redactions: info.Redactions,
		Owner:      info.Owner,
		Sandbox:    sandboxInfo(info.Sandbox),
		Denials:    denialsFromInfo(info.Denials),

		Ports:         info.Ports,
		AwaitingInput: info.AwaitingInput,
		Ready:         info.Ready,
	}
	if !info.Running {
		cpu := info.CPUTime.Milliseconds()
		p.PeakMemory, p.CPUTimeMS = info.MaxRSS, &cpu
	}
	if !info.Limits.IsZero() {
		limits := info.Limits
		p.Limits = &limits
	}
	if !info.ExitedAt.IsZero() {
		exited := info.ExitedAt.Unix()
		p.ExitedAt = &exited
	}
	return p
}
