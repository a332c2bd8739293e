package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc"
)

// The JSON shapes of Coder's process API (codersdk/workspacesdk), kept
// unexported: a Go caller of this profile uses Coder's SDK.
type (
	coderStartRequest struct {
		Command     string            `json:"command"`
		WorkDir     string            `json:"workdir,omitempty"`
		Env         map[string]string `json:"env,omitempty"`
		Background  bool              `json:"background,omitempty"`
		ClientToken string            `json:"client_token,omitempty"`
	}
	coderStartResponse struct {
		ID          string `json:"id"`
		Started     bool   `json:"started"`
		ClientToken string `json:"client_token,omitempty"`
		Attached    bool   `json:"attached,omitempty"`
	}
	coderProcess struct {
		ID         string `json:"id"`
		Command    string `json:"command"`
		WorkDir    string `json:"workdir,omitempty"`
		Background bool   `json:"background"`
		Running    bool   `json:"running"`
		ExitCode   *int   `json:"exit_code,omitempty"`
		StartedAt  int64  `json:"started_at_unix"`
		ExitedAt   *int64 `json:"exited_at_unix,omitempty"`
	}
	coderListResponse struct {
		Processes []coderProcess `json:"processes"`
	}
	coderTruncation struct {
		OriginalBytes int64  `json:"original_bytes"`
		RetainedBytes int64  `json:"retained_bytes"`
		OmittedBytes  int64  `json:"omitted_bytes"`
		Strategy      string `json:"strategy"`
	}
	coderOutput struct {
		Output    string           `json:"output"`
		Truncated *coderTruncation `json:"truncated,omitempty"`
		Running   bool             `json:"running"`
		ExitCode  *int             `json:"exit_code,omitempty"`
		Command   string           `json:"command,omitempty"`
	}
	coderTokenResponse struct {
		Found           bool   `json:"found"`
		Pending         bool   `json:"pending,omitempty"`
		ProcessID       string `json:"process_id,omitempty"`
		TokenIndexAgeMS int64  `json:"token_index_age_ms"`
	}
)

const (
	// coderChatHeader names the chat a request acts for.
	coderChatHeader = "Coder-Chat-Id"
	// coderChatEnv carries the chat into the processes it starts.
	coderChatEnv = "CODER_CHAT_ID"
	// coderMaxList caps GET /list, to keep a model's context small.
	coderMaxList = 10
	// coderMaxLine and coderLineCut are Coder's line limit and the text
	// that ends a cut line.
	coderMaxLine = 2048
	coderLineCut = " ... [truncated]"
)

// tokenEntry is what a client_token names under the Coder profile.
type tokenEntry struct {
	chat string
	id   string // "" while the first Start spawns
}

// routesCoder registers the Coder profile's routes.
func (h *handler) routesCoder(mux *http.ServeMux) {
	mux.HandleFunc("POST /start", h.coderStart)
	mux.HandleFunc("GET /list", h.coderList)
	// "GET /tokens/{token}" and "GET /{id}/output" overlap on
	// /tokens/output and neither is more specific, so ServeMux refuses the
	// pair; one pattern dispatches both. IDs are UUIDs, never "tokens".
	mux.HandleFunc("GET /{id}/{what}", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.PathValue("id") == "tokens":
			h.coderToken(w, r, r.PathValue("what"))
		case r.PathValue("what") == "output":
			h.coderOutput(w, r)
		default:
			coderNoRoute(w, r)
		}
	})
	mux.HandleFunc("POST /{id}/signal", h.coderSignal)
	mux.HandleFunc("/{id}/{what}", coderNoRoute)
}

// coderNoRoute answers a request under /{id}/{what} that no route of the
// profile serves as Coder's router (chi) does: 405 for a path it routes
// under another method, else 404. ServeMux alone would answer 405 for any
// method but GET, since GET /{id}/{what} matches every such path.
func coderNoRoute(w http.ResponseWriter, r *http.Request) {
	id, what := r.PathValue("id"), r.PathValue("what")
	allow := ""
	switch {
	case id == "tokens" || what == "output":
		allow = http.MethodGet
	case what == "signal":
		allow = http.MethodPost
	}
	if allow == "" || allow == r.Method {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Allow", allow)
	w.WriteHeader(http.StatusMethodNotAllowed)
}

// coderChat returns the request's chat, or "" for none, after the
// WithAuthorize gate; it writes 401 and returns false when the gate refuses.
func (h *handler) coderChat(w http.ResponseWriter, r *http.Request) (string, bool) {
	if h.cfg.authorize != nil {
		if _, err := h.cfg.authorize(r); err != nil {
			writeError(w, &Error{
				StatusCode: http.StatusUnauthorized,
				Message:    "The request does not carry an identity this server accepts.",
				Detail:     err.Error(),
			})
			return "", false
		}
	}
	id, err := uuid.Parse(r.Header.Get(coderChatHeader))
	if err != nil {
		return "", true
	}
	return id.String(), true
}

// coderVisible reports whether a request of chat may reach a process owned
// by owner by its ID.
func coderVisible(chat, owner string) bool {
	return chat == "" || owner == "" || owner == chat
}

// coderProcessFor returns the process the path names if chat may reach it, or
// writes 404.
func (h *handler) coderProcessFor(w http.ResponseWriter, r *http.Request, chat string) (*agentproc.Process, bool) {
	id := r.PathValue("id")
	p, err := h.m.Get(id)
	if err != nil || !coderVisible(chat, p.Info().Owner) {
		writeError(w, &Error{StatusCode: http.StatusNotFound, Message: fmt.Sprintf("Process %q not found.", id)})
		return nil, false
	}
	return p, true
}

func (h *handler) coderStart(w http.ResponseWriter, r *http.Request) {
	chat, ok := h.coderChat(w, r)
	if !ok {
		return
	}
	var req coderStartRequest
	if e := decodeBody(w, r, &req); e != nil {
		e.Message = "Request body must be valid JSON."
		writeError(w, e)
		return
	}
	if req.Command == "" {
		writeError(w, &Error{StatusCode: http.StatusBadRequest, Message: "Command is required."})
		return
	}
	env := req.Env
	if chat != "" {
		env = maps.Clone(req.Env)
		if env == nil {
			env = make(map[string]string, 1)
		}
		env[coderChatEnv] = chat
	}
	// The operator's policy holds here as in the default profile: Coder's
	// request has no sandbox of its own, so it gets the operator's, and a
	// work dir outside its Write is refused.
	sb, e := h.narrowSandbox(h.operatorSandbox(), nil, req.WorkDir)
	if e != nil {
		writeError(w, e)
		return
	}
	claimed, e := h.claimToken(req.ClientToken, chat)
	if e != nil {
		writeError(w, e)
		return
	}
	s := h.m.Scope(chat)
	release, e := h.reserve(s)
	if e != nil {
		h.settleToken(req.ClientToken, claimed, nil)
		writeError(w, e)
		return
	}
	p, attached, err := s.StartOrAttach(r.Context(), agentproc.Request{
		Command:    req.Command,
		WorkDir:    req.WorkDir,
		Env:        env,
		Background: req.Background,
		Key:        req.ClientToken,
		Verbatim:   true,
		Sandbox:    sb,
	})
	release()
	h.settleToken(req.ClientToken, claimed, p)
	if err != nil {
		writeError(w, coderStartError(err))
		return
	}
	writeJSON(w, http.StatusOK, coderStartResponse{
		ID:          p.ID(),
		Started:     !attached,
		ClientToken: req.ClientToken,
		Attached:    attached,
	})
}

// coderStartError maps a failed start to Coder's replies.
func coderStartError(err error) *Error {
	switch {
	case errors.Is(err, agentproc.ErrKeyConflict):
		return keyConflict(err)
	case errors.Is(err, agentproc.ErrTooManyProcesses):
		return errorFor(err, "")
	}
	return &Error{StatusCode: http.StatusInternalServerError, Message: "Failed to start process.", Detail: err.Error()}
}

func keyConflict(err error) *Error {
	return &Error{
		StatusCode: http.StatusConflict,
		Message:    "Client token was already used to start a process with different parameters.",
		Detail:     err.Error(),
	}
}

// claimToken checks token against the index before a start: a token another
// chat holds is a 409 whatever the request, since Coder keys tokens across
// chats and agentproc keys them per owner. A token not in the index is
// entered as pending, and claimed is true: the caller settles it with
// settleToken. Same-chat repeats go on to StartOrAttach, whose Key decides
// between attaching and ErrKeyConflict.
func (h *handler) claimToken(token, chat string) (claimed bool, _ *Error) {
	if token == "" {
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.liveTokenLocked(token); ok {
		if e.chat != chat {
			return false, keyConflict(xerrors.Errorf("client token %q belongs to another chat", token))
		}
		return false, nil
	}
	if len(h.tokens) >= h.tokenSweepAt {
		h.sweepTokensLocked()
	}
	h.tokens[token] = &tokenEntry{chat: chat}
	return true, nil
}

// minTokenSweep is the index size below which stale tokens are not swept.
const minTokenSweep = 64

// sweepTokensLocked removes the tokens whose processes retention has
// dropped, which a token never used again would otherwise keep forever. It
// runs when the index has doubled since the last sweep, so its cost per new
// token is constant.
func (h *handler) sweepTokensLocked() {
	for token := range h.tokens {
		h.liveTokenLocked(token)
	}
	h.tokenSweepAt = max(minTokenSweep, 2*len(h.tokens))
}

// settleToken records the process a token started, or, when this request
// claimed the token and started nothing, frees it.
func (h *handler) settleToken(token string, claimed bool, p *agentproc.Process) {
	if token == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.tokens[token]
	switch {
	case p != nil && ok:
		e.id = p.ID()
	case p != nil:
		// The claimer failed and freed the token while this request, of
		// the same chat, started the process after it.
		h.tokens[token] = &tokenEntry{chat: p.Info().Owner, id: p.ID()}
	case claimed && ok && e.id == "":
		delete(h.tokens, token)
	}
}

// liveTokenLocked returns the entry for token unless the process it names
// has been dropped by retention, in which case the entry is removed: the
// token is free again, as the Manager's Key is. Manager.Get takes only the
// Manager's mutex, never a system call, so it may run under h.mu.
func (h *handler) liveTokenLocked(token string) (*tokenEntry, bool) {
	e, ok := h.tokens[token]
	if !ok {
		return nil, false
	}
	if e.id != "" {
		if _, err := h.m.Get(e.id); err != nil {
			delete(h.tokens, token)
			return nil, false
		}
	}
	return e, true
}

// coderToken answers GET /tokens/{token}; ServeMux has unescaped token.
func (h *handler) coderToken(w http.ResponseWriter, r *http.Request, token string) {
	chat, ok := h.coderChat(w, r)
	if !ok {
		return
	}
	resp := coderTokenResponse{TokenIndexAgeMS: h.cfg.clock.Since(h.created, "httpapi", "tokens").Milliseconds()}
	h.mu.Lock()
	e, found := h.liveTokenLocked(token)
	var entry tokenEntry
	if found {
		entry = *e
	}
	h.mu.Unlock()
	switch {
	case !found:
	case entry.id == "":
		resp.Pending = true
	default:
		if p, err := h.m.Get(entry.id); err == nil && coderVisible(chat, p.Info().Owner) {
			resp.Found, resp.ProcessID = true, entry.id
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *handler) coderList(w http.ResponseWriter, r *http.Request) {
	chat, ok := h.coderChat(w, r)
	if !ok {
		return
	}
	// Manager.List's order is Coder's: running first, then newest first.
	var infos []agentproc.Info
	if chat == "" {
		infos = h.m.List()
	} else {
		infos = h.m.Scope(chat).List()
	}
	infos = infos[:min(len(infos), coderMaxList)]
	procs := make([]coderProcess, len(infos))
	for i, info := range infos {
		procs[i] = coderProcess{
			ID:         info.ID,
			Command:    info.Command,
			WorkDir:    info.WorkDir,
			Background: info.Background,
			Running:    info.Running,
			ExitCode:   coderExitCode(info),
			StartedAt:  info.StartedAt.Unix(),
		}
		if !info.ExitedAt.IsZero() {
			exited := info.ExitedAt.Unix()
			procs[i].ExitedAt = &exited
		}
	}
	writeJSON(w, http.StatusOK, coderListResponse{Processes: procs})
}

// coderExitCode is the exit code as Coder reports it: -1 for a process a
// signal ended (os.ProcessState.ExitCode), where agentproc says 128+N.
func coderExitCode(info agentproc.Info) *int {
	if info.ExitCode == nil || info.ExitSignal == "" {
		return info.ExitCode
	}
	code := -1
	return &code
}

func (h *handler) coderOutput(w http.ResponseWriter, r *http.Request) {
	chat, ok := h.coderChat(w, r)
	if !ok {
		return
	}
	p, ok := h.coderProcessFor(w, r, chat)
	if !ok {
		return
	}
	if r.URL.Query().Get("wait") == "true" {
		h.hold(w, r, h.cfg.maxWait, func(ctx context.Context) { _, _ = p.Wait(ctx) })
	}
	// Unlike the default handler, reply even when the client has gone, as
	// Coder does: a recorder-driven test reads the reply of a cancelled
	// wait.
	//
	// Info before the output: once Info says exited, the output is final.
	info := p.Info()
	text, trunc := coderText(p)
	writeJSON(w, http.StatusOK, coderOutput{
		Output:    text,
		Truncated: trunc,
		Running:   info.Running,
		ExitCode:  coderExitCode(info),
		Command:   info.Command,
	})
}

// coderText renders the retained output as Coder's agent does: head, then,
// when the middle was dropped, Coder's marker and the tail, each part with
// long lines cut.
func coderText(p *agentproc.Process) (string, *coderTruncation) {
	// Read(0) returns the head region, or everything when nothing has been
	// dropped; the read after it starts past any dropped middle.
	head, _ := p.Read(0)
	rest, _ := p.Read(head.Next)
	if rest.Omitted == 0 {
		// Nothing dropped; rest holds only what was written between the
		// two reads.
		return coderCutLines(head.Data + rest.Data), nil
	}
	var sb strings.Builder
	sb.WriteString(coderCutLines(head.Data))
	fmt.Fprintf(&sb, "\n\n... [omitted %d bytes] ...\n\n", rest.Omitted)
	sb.WriteString(coderCutLines(rest.Data))
	text := sb.String()
	return text, &coderTruncation{
		OriginalBytes: rest.Next,
		RetainedBytes: int64(len(text)),
		OmittedBytes:  rest.Omitted,
		Strategy:      "head_tail",
	}
}

// coderCutLines cuts every line longer than coderMaxLine bytes so that it
// ends with coderLineCut and is coderMaxLine bytes long, as Coder does, but
// at a rune boundary: the text stays valid UTF-8.
func coderCutLines(s string) string {
	if len(s) <= coderMaxLine {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for s != "" {
		line, rest, found := strings.Cut(s, "\n")
		if len(line) > coderMaxLine {
			keep := coderMaxLine - len(coderLineCut)
			for keep > 0 && !utf8.RuneStart(line[keep]) {
				keep--
			}
			line = line[:keep] + coderLineCut
		}
		sb.WriteString(line)
		if found {
			sb.WriteByte('\n')
		}
		s = rest
	}
	return sb.String()
}

func (h *handler) coderSignal(w http.ResponseWriter, r *http.Request) {
	chat, ok := h.coderChat(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	notFound := &Error{StatusCode: http.StatusNotFound, Message: fmt.Sprintf("Process %q not found.", id)}
	// Coder checks the chat before the body, and an unknown ID only after.
	p, err := h.m.Get(id)
	if err == nil && !coderVisible(chat, p.Info().Owner) {
		writeError(w, notFound)
		return
	}
	var req SignalRequest
	if e := decodeBody(w, r, &req); e != nil {
		e.Message = "Request body must be valid JSON."
		writeError(w, e)
		return
	}
	switch req.Signal {
	case "":
		writeError(w, &Error{StatusCode: http.StatusBadRequest, Message: "Signal is required."})
		return
	case agentproc.SignalKill, agentproc.SignalTerminate:
	default:
		writeError(w, &Error{
			StatusCode: http.StatusBadRequest,
			Message:    fmt.Sprintf(`Unsupported signal %q. Use "kill" or "terminate".`, req.Signal),
		})
		return
	}
	if err != nil {
		writeError(w, notFound)
		return
	}
	if err := p.Signal(req.Signal); err != nil {
		if errors.Is(err, agentproc.ErrNotRunning) {
			writeError(w, &Error{StatusCode: http.StatusConflict, Message: fmt.Sprintf("Process %q is not running.", id)})
			return
		}
		writeError(w, &Error{StatusCode: http.StatusInternalServerError, Message: "Failed to signal process.", Detail: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, Response{Message: fmt.Sprintf("Signal %q sent to process %q.", req.Signal, id)})
}
