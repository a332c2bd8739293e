package httpapi

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentproc/agentproc"
)

// The web page (WithUI): static files embedded in the binary, so the page
// works offline and from go install, and three routes only the page uses.
// The page reads everything through the same scope as the API, so it shows
// exactly what the API would show the same request, and it needs nothing
// the API does not already allow; the routes under /ui/ exist because a
// page cannot follow output or the ports of every row from the public
// routes without polling them, nor stop one process with the grace period.

//go:embed ui
var uiFiles embed.FS

// uiCSP is the Content-Security-Policy of every reply under WithUI: the page
// loads only its own script, style and icon, talks only to its own origin,
// cannot be framed, and runs no inline script or handler.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// uiInfoEvery is how often GET /ui/events compares the caller's running
// processes with what it last sent, for the changes no event reports
// (listening ports, input answered). It reads Info, which the Manager keeps
// current in memory: no /proc read per tick.
const uiInfoEvery = time.Second

// uiUsageEvery is how often GET /ui/events reads the CPU time and memory of
// the caller's running processes (agentproc.Process.Usage, which reads the
// OS's counters: on Linux a cgroup's files or /proc) and sends what changed.
// Slower than uiInfoEvery, as each read costs a pass over /proc
// (docs/measurements.md).
const uiUsageEvery = 2 * time.Second

// uiPartialMax bounds the unfinished line GET /ui/output holds back before
// it sends it as finished text anyway.
const uiPartialMax = 64 << 10

// routesUI adds the page's routes. Exact paths under /ui/ are more specific
// than the API's /{id} patterns, and a process ID is a UUID, never "ui".
func (h *handler) routesUI(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", h.uiFile("ui/index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /ui/app.js", h.uiFile("ui/app.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /ui/app.css", h.uiFile("ui/app.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /ui/icon.svg", h.uiFile("ui/icon.svg", "image/svg+xml"))
	mux.HandleFunc("GET /ui/events", h.uiEvents)
	mux.HandleFunc("GET /ui/output", h.uiOutput)
	mux.HandleFunc("POST /ui/stop", h.uiStop)
}

// uiHeaders sets the security headers of every reply under WithUI.
func uiHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", uiCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// uiFile serves one embedded file. No-cache makes the browser revalidate,
// so a new binary's page is never mixed with an old script.
func (h *handler) uiFile(name, contentType string) http.HandlerFunc {
	data, err := uiFiles.ReadFile(name)
	if err != nil {
		// The names are constants of this package, embedded at build.
		panic(fmt.Sprintf("httpapi: embedded %s: %v", name, err))
	}
	return func(w http.ResponseWriter, r *http.Request) {
		uiHeaders(w)
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(data)
	}
}

// sseStream writes Server-Sent Events on one reply.
type sseStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE sends the headers of an event stream and lifts the connection's
// write deadline, as the stream is meant to stay open.
func startSSE(w http.ResponseWriter) *sseStream {
	rc := http.NewResponseController(w)
	// A writer that cannot take a deadline (http.ErrNotSupported) has
	// none to lift.
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	return &sseStream{w: w, rc: rc}
}

// send writes one event block: an "id:" line when id is not "", the event
// type and v as JSON. An error means the client has gone.
func (s *sseStream) send(id, typ string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var b strings.Builder
	if id != "" {
		fmt.Fprintf(&b, "id: %s\n", id)
	}
	fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data)
	if _, err := fmt.Fprint(s.w, b.String()); err != nil {
		return err
	}
	return s.rc.Flush()
}

// keepAlive writes a comment line, so that proxies and clients do not take
// a quiet stream for dead.
func (s *sseStream) keepAlive() error {
	if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// uiSnapshot is the data of the "snapshot" event of GET /ui/events. Usage
// holds the running processes' current figures, by ID, where the platform
// reads them (absent on macOS, FreeBSD and Windows).
type uiSnapshot struct {
	Processes []Process          `json:"processes"`
	Usage     map[string]uiUsage `json:"usage,omitempty"`
}

// uiUsage is what a running process uses now (agentproc.Usage): its tree's
// CPU time in milliseconds and memory in bytes.
type uiUsage struct {
	CPUTimeMS   int64 `json:"cpu_time_ms"`
	MemoryBytes int64 `json:"memory_bytes"`
}

// uiUsageEvent is the data of a "usage" event of GET /ui/events: the
// running processes whose figures changed since the last one, by ID.
type uiUsageEvent struct {
	Usage map[string]uiUsage `json:"usage"`
}

// uiLive is what GET /ui/events compares between ticks: the parts of a
// running process's Info that change without an event.
type uiLive struct {
	ports    string
	awaiting bool
	ready    bool
}

func uiLiveOf(info agentproc.Info) uiLive {
	var b strings.Builder
	for _, p := range info.Ports {
		fmt.Fprintf(&b, "%s %s %d %d;", p.Network, p.Addr, p.Port, p.PID)
	}
	return uiLive{ports: b.String(), awaiting: info.AwaitingInput, ready: info.Ready}
}

// uiEvents serves GET /ui/events: the caller's events as GET /events sends
// them, preceded by a "snapshot" event holding the caller's processes (as
// GET /list) and interleaved with an "info" event (an Event whose Info is
// set) whenever a running process's ports, awaiting input or readiness
// changed without an event saying so. Every uiUsageEvery a "usage" event
// (uiUsageEvent) carries the CPU time and memory of the running processes
// whose figures moved; the snapshot carries them all. The subscription is
// taken before the snapshot, so no event falls between the two; an event older than the
// snapshot may follow it, and the page never moves an exited row back to
// running. After a "lost" event the page reconnects for a new snapshot.
//
// With ?usage=0 no usage is read at all, for the snapshot or every
// uiUsageEvery: the page asks so while it is hidden (document.hidden), and
// reconnects without it when it is shown again, its new snapshot then
// carrying every figure at once. The rest of the stream goes on, so the
// tab's title keeps counting the running processes.
func (h *handler) uiEvents(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	readUsage := true
	switch v := r.URL.Query().Get("usage"); v {
	case "", "1":
	case "0":
		readUsage = false
	default:
		writeError(w, &Error{
			StatusCode: http.StatusBadRequest,
			Message:    fmt.Sprintf("Invalid query parameter usage=%q: want 0 (no usage read) or 1.", v),
		})
		return
	}
	ctx := r.Context()
	ch := s.Subscribe(ctx)
	stream := startSSE(w)

	infos := s.List()
	snap := uiSnapshot{Processes: make([]Process, len(infos))}
	sent := make(map[string]uiLive, len(infos))
	for i, info := range infos {
		snap.Processes[i] = processFromInfo(info)
		if info.Running {
			sent[info.ID] = uiLiveOf(info)
		}
	}
	usage := uiReader{sent: map[string]uiUsage{}}
	if readUsage {
		snap.Usage = usage.changes(ctx, s, sent)
	}
	if stream.send("", "snapshot", snap) != nil {
		return
	}

	keepAlive := h.cfg.clock.NewTicker(sseKeepAlive, "httpapi", "ui-events")
	defer keepAlive.Stop()
	infoTick := h.cfg.clock.NewTicker(uiInfoEvery, "httpapi", "ui-info")
	defer infoTick.Stop()
	var usageC <-chan time.Time // nil, never ready, without readUsage
	if readUsage {
		usageTick := h.cfg.clock.NewTicker(uiUsageEvery, "httpapi", "ui-usage")
		defer usageTick.Stop()
		usageC = usageTick.C
	}
	for {
		var err error
		select {
		case e, ok := <-ch:
			if !ok {
				return
			}
			switch e.Type {
			case agentproc.EventStarted:
				if e.Info != nil {
					sent[e.ID] = uiLiveOf(*e.Info)
				}
			case agentproc.EventExited, agentproc.EventDropped:
				delete(sent, e.ID)
			}
			err = stream.send(strconv.FormatUint(e.Seq, 10), string(e.Type), eventFromCore(e))
		case <-infoTick.C:
			err = h.uiSendChanges(stream, s, sent)
		case <-usageC:
			if u := usage.changes(ctx, s, sent); len(u) > 0 {
				err = stream.send("", "usage", uiUsageEvent{Usage: u})
			}
		case <-keepAlive.C:
			err = stream.keepAlive()
		}
		if err != nil {
			return
		}
	}
}

// uiSendChanges sends an "info" event for each running process whose live
// parts differ from sent, and records what it sent.
func (h *handler) uiSendChanges(stream *sseStream, s *agentproc.Scope, sent map[string]uiLive) error {
	now := h.cfg.clock.Now("httpapi", "ui-info")
	for _, info := range s.List() {
		if !info.Running {
			continue
		}
		live := uiLiveOf(info)
		if prev, ok := sent[info.ID]; ok && prev == live {
			continue
		}
		sent[info.ID] = live
		p := processFromInfo(info)
		e := Event{Type: "info", ID: info.ID, Owner: info.Owner, Time: now, Info: &p}
		if err := stream.send("", "info", e); err != nil {
			return err
		}
	}
	return nil
}

// uiReader reads the usage of one page's running processes and remembers
// what it sent, so that a process whose figures did not move (a sleeping
// one) is not sent again.
type uiReader struct {
	sent        map[string]uiUsage
	unsupported bool // the platform has no Process.Usage: stop asking
}

// changes reads the usage of the caller's running processes
// (agentproc.Scope.Usage: one pass over /proc for all of them) and returns
// those of running (the IDs the page shows as running) that differ from
// what was sent, recording them as sent. The read is bounded by
// uiUsageEvery, so a slow /proc delays the page's events by at most that;
// a failed read sends nothing.
func (ur *uiReader) changes(ctx context.Context, s *agentproc.Scope, running map[string]uiLive) map[string]uiUsage {
	for id := range ur.sent {
		if _, ok := running[id]; !ok {
			delete(ur.sent, id)
		}
	}
	if ur.unsupported || len(running) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, uiUsageEvery)
	all, err := s.Usage(rctx)
	cancel()
	if errors.Is(err, agentproc.ErrUnsupported) {
		ur.unsupported = true
	}
	if err != nil {
		return nil
	}
	var out map[string]uiUsage
	for id, u := range all {
		if _, ok := running[id]; !ok {
			continue // started since, and its started event not yet sent
		}
		now := uiUsage{CPUTimeMS: u.CPU.Milliseconds(), MemoryBytes: u.Memory}
		if prev, ok := ur.sent[id]; ok && prev == now {
			continue
		}
		ur.sent[id] = now
		if out == nil {
			out = make(map[string]uiUsage)
		}
		out[id] = now
	}
	return out
}

// uiChunk is the data of one "output" event of GET /ui/output. Text is
// rendered (agentproc.PlainText) complete lines to append, coloured in
// Spans; Partial is the rendered unfinished last line, which replaces the
// previous Partial. Resume is the offset to reconnect from: the start of
// the unfinished line, so it is sent again whole. Omitted, Offset, Next and
// EOF mean what agentproc.Chunk's do; AwaitingInput says the process waits
// for input.
type uiChunk struct {
	Offset        int64  `json:"offset"`
	Next          int64  `json:"next"`
	Resume        int64  `json:"resume"`
	Omitted       int64  `json:"omitted"`
	EOF           bool   `json:"eof"`
	Text          string `json:"text"`
	Partial       string `json:"partial"`
	AwaitingInput bool   `json:"awaiting_input,omitempty"`
	// Spans and PartialSpans are Text and Partial in their colours
	// (uistyle.go), when any of it has one; absent otherwise.
	Spans        []uiSpan `json:"spans,omitempty"`
	PartialSpans []uiSpan `json:"partial_spans,omitempty"`
}

// uiOutput serves GET /ui/output?id=ID&offset=N: the process's output from
// absolute offset N as a stream of "output" events, each sent as soon as the
// process writes (agentproc.Process.WaitOutput), until it exits (the last
// event has eof set) or the client leaves. Lines are rendered as a terminal
// shows them; an unfinished line is rendered on its own and sent again once
// it is finished, as a "\r" may still rewrite it.
func (h *handler) uiOutput(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var offset int64
	if v := q.Get("offset"); v != "" {
		off, err := strconv.ParseInt(v, 10, 64)
		if err != nil || off < 0 {
			writeError(w, &Error{
				StatusCode: http.StatusBadRequest,
				Message:    fmt.Sprintf("Invalid query parameter offset=%q: want a byte offset of 0 or more.", v),
			})
			return
		}
		offset = off
	}
	id := q.Get("id")
	p, err := s.Get(id)
	if err != nil {
		writeError(w, errorFor(err, id))
		return
	}
	ctx := r.Context()
	stream := startSSE(w)

	// pending is the raw unfinished line, which starts at resume. (Resume
	// is exact for valid UTF-8; Chunk.Data replaces invalid bytes, so
	// after those it may be a few bytes off, which only a reconnect sees.)
	var pending string
	resume := offset
	told := false
	for {
		c, err := h.uiWaitOutput(ctx, p, offset, stream, &told)
		if err != nil {
			return
		}
		if c.Omitted > 0 && pending != "" {
			// The unfinished line lost its continuation: finish it
			// before the page shows the omission.
			done := uiChunk{Offset: c.Offset, Next: c.Offset, Resume: c.Offset, Text: agentproc.PlainText(pending) + "\n"}
			if stream.send("", "output", done) != nil {
				return
			}
			pending = ""
		}
		data := pending + c.Data
		cut := strings.LastIndexByte(data, '\n') + 1
		if c.EOF || len(data)-cut > uiPartialMax {
			cut = len(data)
		}
		pending = data[cut:]
		if cut > 0 || c.Omitted > 0 {
			resume = c.Next - int64(len(pending))
		}
		out := uiChunk{
			Offset: c.Offset, Next: c.Next, Resume: resume, Omitted: c.Omitted, EOF: c.EOF,
			AwaitingInput: c.AwaitingInput,
		}
		out.Text, out.Spans = uiRender(data[:cut])
		out.Partial, out.PartialSpans = uiRender(pending)
		if stream.send("", "output", out) != nil || c.EOF {
			return
		}
		offset = c.Next
	}
}

// uiWaitOutput waits for output after offset (Process.WaitOutput), writing a
// keep-alive each sseKeepAlive while nothing comes. While the process awaits
// input with nothing new to read, WaitOutput returns at once; the first such
// chunk is returned, so the page hears of the prompt, and after it
// uiWaitOutput looks again each uiInfoEvery (or at the exit) until there is
// something new. *told remembers across calls that the prompt was reported.
func (h *handler) uiWaitOutput(ctx context.Context, p *agentproc.Process, offset int64, stream *sseStream, told *bool) (agentproc.Chunk, error) {
	for {
		tickCtx, cancel := context.WithCancel(ctx)
		t := h.cfg.clock.AfterFunc(sseKeepAlive, cancel, "httpapi", "ui-output")
		c, err := p.WaitOutput(tickCtx, offset)
		t.Stop()
		cancel()
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		fresh := c.Data != "" || c.Omitted > 0 || c.EOF
		if err != nil && !fresh {
			// The keep-alive tick ended the wait.
			if err := stream.keepAlive(); err != nil {
				return c, err
			}
			continue
		}
		if fresh || !c.AwaitingInput {
			*told = false
			return c, nil
		}
		if !*told {
			*told = true
			return c, nil
		}
		wait := h.cfg.clock.NewTimer(uiInfoEvery, "httpapi", "ui-output-input")
		select {
		case <-p.Done():
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
	}
}

// uiStopRequest is the body of POST /ui/stop.
type uiStopRequest struct {
	ID string `json:"id"`
}

// uiStop serves POST /ui/stop {"id"}: stops the process as
// agentproc.Process.Stop does (terminate, then kill after the Manager's
// grace period), which the API's signal route cannot, and replies with its
// final state. Like POST /stop-all, the ladder runs to its end even if the
// client leaves.
func (h *handler) uiStop(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	var req uiStopRequest
	if !h.decode(w, r, &req) {
		return
	}
	p, err := s.Get(req.ID)
	if err != nil {
		writeError(w, errorFor(err, req.ID))
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.cfg.maxWait + writeHeadroom))
	info, err := p.Stop(context.WithoutCancel(r.Context()))
	if err != nil {
		writeError(w, errorFor(err, p.ID()))
		return
	}
	writeJSON(w, http.StatusOK, processFromInfo(info))
}
