package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"time"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc"
)

// handler serves the routes of one Manager.
type handler struct {
	m   *agentproc.Manager
	cfg config

	mu sync.Mutex
	// pending counts, per owner, the Starts past the per-owner cap check
	// that have not returned yet (WithMaxRunningPerOwner).
	pending map[string]int
	// tokens is the Coder profile's client_token index (coder.go), swept
	// of dropped processes' tokens when it reaches tokenSweepAt entries.
	tokens       map[string]*tokenEntry
	tokenSweepAt int

	// created is when the handler was made, on its clock: the age of the
	// token index, which starts empty with the handler.
	created time.Time
}

// NewHandler returns an http.Handler serving m's processes over the routes
// described in the package documentation. Mount it under a prefix with
// http.StripPrefix. The handler does not own m: closing m is the caller's
// job, and requests that arrive after Close get 503 from POST /start and
// still read the processes m retained.
//
// Every request acts for one owner and sees only that owner's processes
// (agentproc.Scope). Without WithAuthorize the owner is the value of the
// owner header (DefaultOwnerHeader, or WithOwnerHeader); a request without
// the header acts as the empty owner, which sees exactly the processes that
// have no owner (those started by Manager.Start or by requests without the
// header), never everyone's. With WithAuthorize the hook decides and the
// header is ignored.
func NewHandler(m *agentproc.Manager, opts ...Option) http.Handler {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	h := &handler{
		m:            m,
		cfg:          cfg,
		pending:      make(map[string]int),
		tokens:       make(map[string]*tokenEntry),
		tokenSweepAt: minTokenSweep,
		created:      cfg.clock.Now("httpapi", "created"),
	}
	if cfg.authorize == nil {
		h.warn("httpapi: no WithAuthorize hook: anything that can reach this handler can run commands as this user; " +
			"authenticate requests (such as with a bearer token) or serve it on a Unix socket only you can open")
	}
	mux := http.NewServeMux()
	if cfg.coder {
		h.routesCoder(mux)
		return h.checkOrigin(mux)
	}
	// "GET /list" is more specific than "GET /{id}", so the mux routes
	// /list there; an ID is a UUID and never collides with it.
	mux.HandleFunc("POST /start", h.start)
	mux.HandleFunc("GET /list", h.list)
	mux.HandleFunc("GET /{id}", h.get)
	mux.HandleFunc("DELETE /{id}", h.remove)
	mux.HandleFunc("GET /{id}/output", h.output)
	mux.HandleFunc("POST /{id}/signal", h.signal)
	mux.HandleFunc("POST /{id}/stdin", h.stdin)
	mux.HandleFunc("GET /events", h.events)
	mux.HandleFunc("POST /stop-all", h.stopAll)
	mux.HandleFunc("POST /prune", h.prune)
	if cfg.ui {
		h.routesUI(mux)
	}
	return h.checkOrigin(mux)
}

// warn logs msg through the configured logger.
func (h *handler) warn(msg string) {
	if h.cfg.logger == nil {
		log.Print(msg)
		return
	}
	h.cfg.logger.Warn(context.Background(), msg)
}

// scope returns the view of the Manager the request acts in, or writes 401
// and returns false.
func (h *handler) scope(w http.ResponseWriter, r *http.Request) (*agentproc.Scope, bool) {
	if h.cfg.authorize == nil {
		return h.m.Scope(r.Header.Get(h.cfg.ownerHeader)), true
	}
	owner, err := h.cfg.authorize(r)
	if err != nil {
		writeError(w, &Error{
			StatusCode: http.StatusUnauthorized,
			Message:    "The request does not carry an identity this server accepts.",
			Detail:     err.Error(),
		})
		return nil, false
	}
	return h.m.Scope(owner), true
}

// process returns the caller's process named by the path, or writes 404.
func (h *handler) process(w http.ResponseWriter, r *http.Request, s *agentproc.Scope) (*agentproc.Process, bool) {
	id := r.PathValue("id")
	p, err := s.Get(id)
	if err != nil {
		writeError(w, errorFor(err, id))
		return nil, false
	}
	return p, true
}

func (h *handler) start(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	var req StartRequest
	if !h.decode(w, r, &req) {
		return
	}
	if req.Command == "" {
		writeError(w, &Error{StatusCode: http.StatusBadRequest, Message: "The command is required."})
		return
	}
	var timeout time.Duration
	if req.Timeout != "" {
		var err error
		if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout <= 0 {
			writeError(w, &Error{
				StatusCode: http.StatusBadRequest,
				Message:    fmt.Sprintf(`Invalid timeout %q: want a positive duration such as "30s".`, req.Timeout),
			})
			return
		}
	}
	areq := agentproc.Request{
		Command:    req.Command,
		WorkDir:    req.WorkDir,
		Env:        req.Env,
		Background: req.Background,
		Timeout:    timeout,
		Key:        req.Key,
		Stdin:      req.Stdin,
		TTY:        req.TTY,
		Ready:      req.Ready,
	}
	if e := limitsFromRequest(req, &areq); e != nil {
		writeError(w, e)
		return
	}
	if e := h.sandboxFromRequest(req, &areq); e != nil {
		writeError(w, e)
		return
	}
	release, e := h.reserve(s)
	if e != nil {
		writeError(w, e)
		return
	}
	p, attached, err := s.StartOrAttach(r.Context(), areq)
	release()
	if err != nil {
		writeError(w, errorFor(err, ""))
		return
	}
	info := p.Info()
	writeJSON(w, http.StatusOK, StartResponse{
		ID:         p.ID(),
		Started:    !attached,
		Command:    info.Command,
		Background: info.Background,
		Warnings:   info.Warnings,
	})
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	infos := s.List()
	// Never null: a client iterating over processes expects an array.
	procs := make([]Process, len(infos))
	for i, info := range infos {
		procs[i] = processFromInfo(info)
	}
	writeJSON(w, http.StatusOK, ListResponse{Processes: procs})
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	p, ok := h.process(w, r, s)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, processFromInfo(p.Info()))
}

func (h *handler) signal(w http.ResponseWriter, r *http.Request) {
	s, ok := h.scope(w, r)
	if !ok {
		return
	}
	var req SignalRequest
	if !h.decode(w, r, &req) {
		return
	}
	switch req.Signal {
	case agentproc.SignalKill, agentproc.SignalTerminate, agentproc.SignalInterrupt:
	case "":
		writeError(w, &Error{StatusCode: http.StatusBadRequest, Message: "The signal is required."})
		return
	default:
		writeError(w, &Error{
			StatusCode: http.StatusBadRequest,
			Message:    fmt.Sprintf("Unsupported signal %q: use \"kill\", \"terminate\" or \"interrupt\".", req.Signal),
		})
		return
	}
	p, ok := h.process(w, r, s)
	if !ok {
		return
	}
	if err := p.Signal(req.Signal); err != nil {
		writeError(w, errorFor(err, p.ID()))
		return
	}
	writeJSON(w, http.StatusOK, Response{
		Message: fmt.Sprintf("Sent %s to process %q.", req.Signal, p.ID()),
	})
}

// decode checks the request's Content-Type and decodes its body into v, or
// writes the error reply and returns false.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if !requireJSON(w, r) {
		return false
	}
	if e := decodeBody(w, r, v); e != nil {
		writeError(w, e)
		return false
	}
	return true
}

// reserve takes one of the owner's running slots (WithMaxRunningPerOwner)
// for a Start, or returns a 429. The caller calls release once Start has
// returned: by then a started process is in List, so it goes on counting.
// Counting List's running processes plus the Starts in flight may count a
// process twice for an instant, never zero times, so the cap is never
// overshot; the Manager is asked outside h.mu, as List may take a while
// with many processes.
func (h *handler) reserve(s *agentproc.Scope) (release func(), _ *Error) {
	if h.cfg.maxPerOwner <= 0 {
		return func() {}, nil
	}
	owner := s.Owner()
	h.mu.Lock()
	h.pending[owner]++
	inFlight := h.pending[owner]
	h.mu.Unlock()
	release = func() {
		h.mu.Lock()
		if h.pending[owner]--; h.pending[owner] == 0 {
			delete(h.pending, owner)
		}
		h.mu.Unlock()
	}
	running := 0
	for _, info := range s.List() {
		if info.Running {
			running++
		}
	}
	// inFlight includes this Start.
	if running+inFlight > h.cfg.maxPerOwner {
		release()
		return nil, &Error{
			StatusCode: http.StatusTooManyRequests,
			Message:    fmt.Sprintf("This owner already has %d processes running, the most allowed; wait for one to exit or stop one.", h.cfg.maxPerOwner),
		}
	}
	return release, nil
}

// decodeBody decodes the request body, exactly one JSON value of at most
// MaxBodyBytes, into v. Unknown fields are ignored, as a client written for
// a newer server may send some.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) *Error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil {
		// A second value, even a valid one, means the body is not what
		// the client meant to send.
		var extra json.RawMessage
		if err = dec.Decode(&extra); errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			err = xerrors.New("unexpected data after the JSON value")
		}
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &Error{
			StatusCode: http.StatusRequestEntityTooLarge,
			Message:    fmt.Sprintf("The request body is larger than %d bytes.", MaxBodyBytes),
		}
	}
	return &Error{
		StatusCode: http.StatusBadRequest,
		Message:    "The request body must be one valid JSON object.",
		Detail:     err.Error(),
	}
}

// errorFor maps an error from the library to a reply. id names the process
// the request was about, "" for none.
func errorFor(err error, id string) *Error {
	e := &Error{StatusCode: http.StatusInternalServerError, Detail: err.Error()}
	switch {
	case errors.Is(err, agentproc.ErrNotFound):
		// No detail: the reply must not differ between an ID that never
		// existed and another owner's.
		e.StatusCode, e.Message, e.Detail = http.StatusNotFound, fmt.Sprintf("Process %q not found.", id), ""
	case errors.Is(err, agentproc.ErrNotRunning), errors.Is(err, agentproc.ErrExited):
		e.StatusCode, e.Message = http.StatusConflict, fmt.Sprintf("Process %q is not running.", id)
	case errors.Is(err, agentproc.ErrRunning):
		e.StatusCode, e.Message = http.StatusConflict, fmt.Sprintf("Process %q is running; stop it first.", id)
	case errors.Is(err, agentproc.ErrKeyConflict):
		e.StatusCode, e.Message = http.StatusConflict, "The key was already used to start a process with a different request."
	case errors.Is(err, agentproc.ErrNoStdin), errors.Is(err, agentproc.ErrStdinClosed), errors.Is(err, agentproc.ErrNoTTY):
		e.StatusCode, e.Message = http.StatusConflict, fmt.Sprintf("Process %q has no open input or terminal for the request.", id)
	case errors.Is(err, agentproc.ErrInvalidRequest), errors.Is(err, agentproc.ErrUnsupportedSignal):
		e.StatusCode, e.Message = http.StatusBadRequest, "The request is invalid."
	case errors.Is(err, agentproc.ErrSandboxLoosened):
		// Start's own check of a narrowed policy (a link swapped in
		// after sandboxFromRequest's check).
		e.StatusCode, e.Message = http.StatusForbidden, "The sandbox asks for more than this server allows."
	case errors.Is(err, agentproc.ErrTooManyProcesses):
		e.StatusCode, e.Message = http.StatusTooManyRequests, "Too many processes are running; wait for one to exit or stop one."
	case errors.Is(err, agentproc.ErrClosed):
		e.StatusCode, e.Message = http.StatusServiceUnavailable, "The process manager is shutting down."
	case errors.Is(err, errors.ErrUnsupported):
		// agentproc.ErrUnsupported matches it, and so does an
		// errors.ErrUnsupported from anywhere else.
		e.StatusCode, e.Message = http.StatusNotImplemented, "This server's platform does not support the request."
	case id == "":
		e.Message = "Failed to start the process."
	default:
		e.Message = fmt.Sprintf("Failed to act on process %q.", id)
	}
	return e
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.StatusCode, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	// Output is program text for people and models: "<", ">" and "&"
	// stay readable instead of becoming \u003c and friends.
	enc.SetEscapeHTML(false)
	// An error here means the client has gone; there is no one to tell.
	_ = enc.Encode(v)
}
