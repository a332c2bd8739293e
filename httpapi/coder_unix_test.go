//go:build unix

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// The shapes of Coder's process API (codersdk/workspacesdk and
// codersdk.Response), written here from its field names. Every reply of the
// compat handler is decoded into them with DisallowUnknownFields, so a key
// Coder does not have fails the test.
type (
	cStartRequest struct {
		Command     string            `json:"command"`
		WorkDir     string            `json:"workdir,omitempty"`
		Env         map[string]string `json:"env,omitempty"`
		Background  bool              `json:"background,omitempty"`
		ClientToken string            `json:"client_token,omitempty"`
	}
	cStartResponse struct {
		ID          string `json:"id"`
		Started     bool   `json:"started"`
		ClientToken string `json:"client_token,omitempty"`
		Attached    bool   `json:"attached,omitempty"`
	}
	cProcessInfo struct {
		ID         string `json:"id"`
		Command    string `json:"command"`
		WorkDir    string `json:"workdir,omitempty"`
		Background bool   `json:"background"`
		Running    bool   `json:"running"`
		ExitCode   *int   `json:"exit_code,omitempty"`
		StartedAt  int64  `json:"started_at_unix"`
		ExitedAt   *int64 `json:"exited_at_unix,omitempty"`
	}
	cListResponse struct {
		Processes []cProcessInfo `json:"processes"`
	}
	cTruncation struct {
		OriginalBytes int    `json:"original_bytes"`
		RetainedBytes int    `json:"retained_bytes"`
		OmittedBytes  int    `json:"omitted_bytes"`
		Strategy      string `json:"strategy"`
	}
	cOutputResponse struct {
		Output    string       `json:"output"`
		Truncated *cTruncation `json:"truncated,omitempty"`
		Running   bool         `json:"running"`
		ExitCode  *int         `json:"exit_code,omitempty"`
		Command   string       `json:"command,omitempty"`
	}
	cSignalRequest struct {
		Signal string `json:"signal"`
	}
	cTokenResponse struct {
		Found           bool   `json:"found"`
		Pending         bool   `json:"pending,omitempty"`
		ProcessID       string `json:"process_id,omitempty"`
		TokenIndexAgeMS int64  `json:"token_index_age_ms"`
	}
	cResponse struct {
		Message     string `json:"message"`
		Detail      string `json:"detail,omitempty"`
		Validations []any  `json:"validations,omitempty"`
	}
)

// coderAgent is a Manager served with WithCoderCompat under Coder's prefix,
// driven as Coder's client drives its agent.
type coderAgent struct {
	t       *testing.T
	m       *agentproc.Manager
	handler http.Handler
	srv     *httptest.Server
}

const coderPrefix = "/api/v0/processes"

func newCoderAgent(t *testing.T, mopts ...agentproc.Option) *coderAgent {
	t.Helper()
	m := agentproc.New(mopts...)
	h := http.StripPrefix(coderPrefix, httpapi.NewHandler(m, quiet(), httpapi.WithCoderCompat()))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close manager: %v", err)
		}
	})
	return &coderAgent{t: t, m: m, handler: h, srv: srv}
}

// send makes one request as Coder's agentConn.apiRequest does: a JSON body
// with a trailing newline and HTML escaping off, no Content-Type, and the
// chat header when chat is not "". A 200 reply is decoded into out, another
// into the returned cResponse, both rejecting unknown fields.
func (a *coderAgent) send(ctx context.Context, method, path string, body any, chat string, out any) (int, cResponse) {
	a.t.Helper()
	var rd io.Reader
	if r, ok := body.(io.Reader); ok {
		// Sent as is, as apiRequest does with a reader.
		rd = r
	} else if body != nil {
		buf := &bytes.Buffer{}
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body); err != nil {
			a.t.Fatal(err)
		}
		rd = buf
	}
	req, err := http.NewRequestWithContext(ctx, method, a.srv.URL+coderPrefix+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if chat != "" {
		req.Header.Set("Coder-Chat-Id", chat)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var e cResponse
	if res.StatusCode == http.StatusOK {
		decodeStrict(a.t, res.Body, out)
	} else {
		decodeStrict(a.t, res.Body, &e)
	}
	return res.StatusCode, e
}

func decodeStrict(t *testing.T, r io.Reader, v any) {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("reply %s does not decode into Coder's %T: %v", b, v, err)
	}
}

func (a *coderAgent) start(req cStartRequest, chat string) (int, cStartResponse, cResponse) {
	a.t.Helper()
	var resp cStartResponse
	code, e := a.send(testContext(a.t), "POST", "/start", req, chat, &resp)
	return code, resp, e
}

// mustStart starts req and returns the ID.
func (a *coderAgent) mustStart(req cStartRequest, chat string) string {
	a.t.Helper()
	code, resp, e := a.start(req, chat)
	if code != http.StatusOK || !resp.Started || resp.ID == "" {
		a.t.Fatalf("start %q: %d %+v %+v, want 200, started, an id", req.Command, code, resp, e)
	}
	return resp.ID
}

func (a *coderAgent) output(id, query, chat string) (int, cOutputResponse, cResponse) {
	a.t.Helper()
	var resp cOutputResponse
	code, e := a.send(testContext(a.t), "GET", "/"+id+"/output"+query, nil, chat, &resp)
	return code, resp, e
}

// waitExit blocks on ?wait=true, as Coder's client does, until the process
// exits.
func (a *coderAgent) waitExit(id string) cOutputResponse {
	a.t.Helper()
	code, resp, e := a.output(id, "?wait=true", "")
	if code != http.StatusOK || resp.Running {
		a.t.Fatalf("wait for %s: %d %+v %+v, want 200 and exited", id, code, resp, e)
	}
	return resp
}

func (a *coderAgent) list(chat string) cListResponse {
	a.t.Helper()
	var resp cListResponse
	if code, e := a.send(testContext(a.t), "GET", "/list", nil, chat, &resp); code != http.StatusOK {
		a.t.Fatalf("list: %d %+v", code, e)
	}
	return resp
}

func (a *coderAgent) signal(id, sig, chat string) (int, cResponse) {
	a.t.Helper()
	var resp cResponse
	code, e := a.send(testContext(a.t), "POST", "/"+id+"/signal", cSignalRequest{Signal: sig}, chat, &resp)
	if code == http.StatusOK {
		return code, resp
	}
	return code, e
}

func (a *coderAgent) token(token, chat string) cTokenResponse {
	a.t.Helper()
	var resp cTokenResponse
	if code, e := a.send(testContext(a.t), "GET", "/tokens/"+token, nil, chat, &resp); code != http.StatusOK {
		a.t.Fatalf("token probe: %d %+v", code, e)
	}
	return resp
}

func findProcess(procs []cProcessInfo, id string) *cProcessInfo {
	for i := range procs {
		if procs[i].ID == id {
			return &procs[i]
		}
	}
	return nil
}

func wantCode(t *testing.T, what string, got, want int, e cResponse) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: status %d (%+v), want %d", what, got, e, want)
	}
}

func wantExit(t *testing.T, resp cOutputResponse, code int) {
	t.Helper()
	if resp.Running || resp.ExitCode == nil || *resp.ExitCode != code {
		t.Fatalf("got %+v, want exited with code %d", resp, code)
	}
}

// TestCoderCases runs, against WithCoderCompat, the cases of Coder's
// agent/agentproc/api_test.go that apply to a process API (46 of its 49;
// see docs/coder-compat.md for the three left out), each written anew from what the
// case sends and expects. Subtest names are Coder's.
func TestCoderCases(t *testing.T) {
	t.Parallel()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skipf("no home directory: %v", err)
	}
	newChat := func() string { return uuid.NewString() }

	cases := map[string]func(t *testing.T){
		// TestStartProcess
		"StartProcess/ForegroundCommand": func(t *testing.T) {
			a := newCoderAgent(t)
			a.mustStart(cStartRequest{Command: "echo hello"}, "")
		},
		"StartProcess/BackgroundCommand": func(t *testing.T) {
			a := newCoderAgent(t)
			a.mustStart(cStartRequest{Command: "echo background", Background: true}, "")
		},
		"StartProcess/EmptyCommand": func(t *testing.T) {
			a := newCoderAgent(t)
			code, _, e := a.start(cStartRequest{}, "")
			wantCode(t, "start", code, http.StatusBadRequest, e)
			if !strings.Contains(e.Message, "Command is required") {
				t.Fatalf("message %q, want it to contain %q", e.Message, "Command is required")
			}
		},
		"StartProcess/MalformedJSON": func(t *testing.T) {
			a := newCoderAgent(t)
			code, e := a.send(testContext(t), "POST", "/start", strings.NewReader("{invalid json"), "", nil)
			wantCode(t, "start", code, http.StatusBadRequest, e)
			if !strings.Contains(e.Message, "valid JSON") {
				t.Fatalf("message %q, want it to contain %q", e.Message, "valid JSON")
			}
		},
		"StartProcess/CustomWorkDir": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "touch marker.txt && ls marker.txt", WorkDir: t.TempDir()}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			if !strings.Contains(resp.Output, "marker.txt") {
				t.Fatalf("output %q, want marker.txt", resp.Output)
			}
		},
		"StartProcess/DefaultWorkDirIsHome": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo ok"}, "")
			wantExit(t, a.waitExit(id), 0)
			p := findProcess(a.list("").Processes, id)
			if p == nil || p.WorkDir != home {
				t.Fatalf("listed %+v, want workdir %q", p, home)
			}
		},
		"StartProcess/DefaultWorkDirFromClosure": func(t *testing.T) {
			dir := t.TempDir()
			a := newCoderAgent(t, agentproc.WithWorkDir(func() string { return dir }))
			id := a.mustStart(cStartRequest{Command: "touch marker.txt && ls marker.txt"}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			if _, err := os.Stat(filepath.Join(dir, "marker.txt")); err != nil || !strings.Contains(resp.Output, "marker.txt") {
				t.Fatalf("output %q, stat %v; want the marker in %s", resp.Output, err, dir)
			}
		},
		"StartProcess/DefaultWorkDirClosureNonExistentFallsBackToHome": func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "nonexistent")
			a := newCoderAgent(t, agentproc.WithWorkDir(func() string { return missing }))
			id := a.mustStart(cStartRequest{Command: "echo ok"}, "")
			wantExit(t, a.waitExit(id), 0)
			if p := findProcess(a.list("").Processes, id); p == nil || p.WorkDir != home {
				t.Fatalf("listed %+v, want workdir %q", p, home)
			}
		},
		"StartProcess/CustomEnv": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "printenv TEST_PROC_ENV", Env: map[string]string{"TEST_PROC_ENV": "custom_value_12345"}}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			if strings.TrimSpace(resp.Output) != "custom_value_12345" {
				t.Fatalf("output %q, want the value", resp.Output)
			}
		},
		"StartProcess/UpdateEnvHook": func(t *testing.T) {
			a := newCoderAgent(t, agentproc.WithEnv(func(base []string) ([]string, error) {
				return append(base, "TEST_UPDATE_ENV=injected_by_hook"), nil
			}))
			id := a.mustStart(cStartRequest{Command: "printenv TEST_UPDATE_ENV"}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			if strings.TrimSpace(resp.Output) != "injected_by_hook" {
				t.Fatalf("output %q, want the hook's value", resp.Output)
			}
		},
		"StartProcess/UpdateEnvHookOverriddenByReqEnv": func(t *testing.T) {
			a := newCoderAgent(t, agentproc.WithEnv(func(base []string) ([]string, error) {
				return append(base, "TEST_OVERRIDE=from_hook"), nil
			}))
			id := a.mustStart(cStartRequest{Command: "printenv TEST_OVERRIDE", Env: map[string]string{"TEST_OVERRIDE": "from_request"}}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			if strings.TrimSpace(resp.Output) != "from_request" {
				t.Fatalf("output %q, want the request's value", resp.Output)
			}
		},

		// TestStartProcessClientToken
		"ClientToken/SameTokenAttaches": func(t *testing.T) {
			a := newCoderAgent(t)
			req := cStartRequest{Command: "echo hello", ClientToken: "tok-1"}
			code, first, e := a.start(req, "")
			wantCode(t, "first", code, http.StatusOK, e)
			if !first.Started || first.Attached || first.ClientToken != "tok-1" {
				t.Fatalf("first %+v, want started, not attached, token echoed", first)
			}
			code, second, e := a.start(req, "")
			wantCode(t, "second", code, http.StatusOK, e)
			if second.ID != first.ID || second.Started || !second.Attached || second.ClientToken != "tok-1" {
				t.Fatalf("second %+v, want id %s, attached, not started, token echoed", second, first.ID)
			}
		},
		"ClientToken/SameTokenDifferentCommandConflicts": func(t *testing.T) {
			a := newCoderAgent(t)
			a.mustStart(cStartRequest{Command: "echo hello", ClientToken: "tok-1"}, "")
			code, _, e := a.start(cStartRequest{Command: "echo goodbye", ClientToken: "tok-1"}, "")
			wantCode(t, "second", code, http.StatusConflict, e)
		},
		"ClientToken/SameTokenDifferentBackgroundConflicts": func(t *testing.T) {
			a := newCoderAgent(t)
			a.mustStart(cStartRequest{Command: "echo hello", ClientToken: "tok-1"}, "")
			code, _, e := a.start(cStartRequest{Command: "echo hello", Background: true, ClientToken: "tok-1"}, "")
			wantCode(t, "second", code, http.StatusConflict, e)
		},
		"ClientToken/SameTokenDifferentEnvConflicts": func(t *testing.T) {
			a := newCoderAgent(t)
			a.mustStart(cStartRequest{Command: "echo hello", Env: map[string]string{"FOO": "bar"}, ClientToken: "tok-1"}, "")
			code, _, e := a.start(cStartRequest{Command: "echo hello", Env: map[string]string{"FOO": "baz"}, ClientToken: "tok-1"}, "")
			wantCode(t, "second", code, http.StatusConflict, e)
		},
		"ClientToken/SameTokenDifferentChatsConflicts": func(t *testing.T) {
			a := newCoderAgent(t)
			req := cStartRequest{Command: "echo hello", ClientToken: "tok-1"}
			a.mustStart(req, newChat())
			code, _, e := a.start(req, newChat())
			wantCode(t, "other chat", code, http.StatusConflict, e)
			// Nor may a request without a chat take another chat's token.
			code, _, e = a.start(req, "")
			wantCode(t, "no chat", code, http.StatusConflict, e)
		},
		"ClientToken/NoTokenAlwaysStartsNew": func(t *testing.T) {
			a := newCoderAgent(t)
			req := cStartRequest{Command: "echo hello"}
			code, first, e := a.start(req, "")
			wantCode(t, "first", code, http.StatusOK, e)
			if !first.Started || first.Attached || first.ClientToken != "" {
				t.Fatalf("first %+v, want started, no token", first)
			}
			if second := a.mustStart(req, ""); second == first.ID {
				t.Fatalf("second start got the first's id %s", second)
			}
		},

		// TestProcessByToken
		"ProcessByToken/Found": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo hello", ClientToken: "tok-1"}, "")
			if resp := a.token("tok-1", ""); !resp.Found || resp.ProcessID != id || resp.Pending {
				t.Fatalf("probe %+v, want found %s", resp, id)
			}
		},
		"ProcessByToken/NotFound": func(t *testing.T) {
			a := newCoderAgent(t)
			if resp := a.token("tok-missing", ""); resp.Found || resp.ProcessID != "" || resp.TokenIndexAgeMS < 0 {
				t.Fatalf("probe %+v, want not found and an age >= 0", resp)
			}
		},
		"ProcessByToken/EscapedToken": func(t *testing.T) {
			a := newCoderAgent(t)
			const tok = "tok/with reserved?bytes"
			id := a.mustStart(cStartRequest{Command: "echo hello", ClientToken: tok}, "")
			if resp := a.token(url.PathEscape(tok), ""); !resp.Found || resp.ProcessID != id {
				t.Fatalf("probe %+v, want found %s", resp, id)
			}
		},
		"ProcessByToken/ChatIsolation": func(t *testing.T) {
			a := newCoderAgent(t)
			chatA, chatB := newChat(), newChat()
			id := a.mustStart(cStartRequest{Command: "echo hello", ClientToken: "tok-1"}, chatA)
			if own := a.token("tok-1", chatA); !own.Found || own.ProcessID != id {
				t.Fatalf("own chat's probe %+v, want found %s", own, id)
			}
			if other := a.token("tok-1", chatB); other.Found || other.ProcessID != "" {
				t.Fatalf("other chat's probe %+v, want not found", other)
			}
		},

		// TestListProcesses
		"ListProcesses/NoProcesses": func(t *testing.T) {
			a := newCoderAgent(t)
			if resp := a.list(""); resp.Processes == nil || len(resp.Processes) != 0 {
				t.Fatalf("list %+v, want an empty, non-null array", resp)
			}
		},
		"ListProcesses/FilterByChatID": func(t *testing.T) {
			a := newCoderAgent(t)
			chatA, chatB := newChat(), newChat()
			id1 := a.mustStart(cStartRequest{Command: "echo chat-a"}, chatA)
			a.waitExit(id1)
			id2 := a.mustStart(cStartRequest{Command: "echo chat-b"}, chatB)
			a.waitExit(id2)
			id3 := a.mustStart(cStartRequest{Command: "echo chat-a-2"}, chatA)
			a.waitExit(id3)
			if got := a.list(chatA).Processes; len(got) != 2 || findProcess(got, id1) == nil || findProcess(got, id3) == nil {
				t.Fatalf("chat A lists %+v, want %s and %s", got, id1, id3)
			}
			if got := a.list(chatB).Processes; len(got) != 1 || got[0].ID != id2 {
				t.Fatalf("chat B lists %+v, want %s", got, id2)
			}
			if got := a.list("").Processes; len(got) != 3 {
				t.Fatalf("no chat lists %d, want 3", len(got))
			}
		},
		"ListProcesses/ChatIDFiltering": func(t *testing.T) {
			a := newCoderAgent(t)
			chat := newChat()
			id := a.mustStart(cStartRequest{Command: "echo with-chat"}, chat)
			a.waitExit(id)
			if got := a.list(chat).Processes; len(got) != 1 || got[0].ID != id {
				t.Fatalf("own chat lists %+v, want %s", got, id)
			}
			if got := a.list(newChat()).Processes; len(got) != 0 {
				t.Fatalf("other chat lists %+v, want none", got)
			}
			if got := a.list("").Processes; len(got) != 1 {
				t.Fatalf("no chat lists %+v, want one", got)
			}
		},
		"ListProcesses/SortAndLimit": func(t *testing.T) {
			a := newCoderAgent(t)
			var ids []string
			for i := range 12 {
				id := a.mustStart(cStartRequest{Command: fmt.Sprintf("echo proc-%d", i)}, "")
				a.waitExit(id)
				ids = append(ids, id)
			}
			got := a.list("").Processes
			if len(got) != 10 {
				t.Fatalf("listed %d, want 10", len(got))
			}
			// Newest first: the last started leads, the two oldest are cut.
			for i, p := range got {
				if want := ids[11-i]; p.ID != want {
					t.Fatalf("entry %d is %s, want %s", i, p.ID, want)
				}
				if i > 0 && got[i-1].StartedAt < p.StartedAt {
					t.Fatalf("started_at_unix not descending: %+v", got)
				}
			}
		},
		"ListProcesses/RunningProcessesSortedFirst": func(t *testing.T) {
			a := newCoderAgent(t)
			exited := a.mustStart(cStartRequest{Command: "echo done"}, "")
			a.waitExit(exited)
			running := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			got := a.list("").Processes
			if len(got) != 2 || got[0].ID != running || !got[0].Running || got[1].ID != exited || got[1].Running {
				t.Fatalf("list %+v, want %s running then %s exited", got, running, exited)
			}
			code, e := a.signal(running, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
		},
		"ListProcesses/MixedRunningAndExited": func(t *testing.T) {
			a := newCoderAgent(t)
			exitedID := a.mustStart(cStartRequest{Command: "echo done"}, "")
			a.waitExit(exitedID)
			runningID := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			got := a.list("").Processes
			exited, running := findProcess(got, exitedID), findProcess(got, runningID)
			if len(got) != 2 || exited == nil || exited.Running || exited.ExitCode == nil || running == nil || !running.Running {
				t.Fatalf("list %+v, want one exited with a code and one running", got)
			}
			code, e := a.signal(runningID, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
		},

		// TestProcessOutput
		"ProcessOutput/ExitedProcess": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo hello-output"}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			if !strings.Contains(resp.Output, "hello-output") {
				t.Fatalf("output %q", resp.Output)
			}
		},
		"ProcessOutput/RunningProcess": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			code, resp, e := a.output(id, "", "")
			wantCode(t, "output", code, http.StatusOK, e)
			if !resp.Running {
				t.Fatalf("output %+v, want running", resp)
			}
			code, e = a.signal(id, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
			a.waitExit(id)
		},
		"ProcessOutput/NonexistentProcess": func(t *testing.T) {
			a := newCoderAgent(t)
			code, _, e := a.output("nonexistent-id-12345", "", "")
			wantCode(t, "output", code, http.StatusNotFound, e)
			if !strings.Contains(e.Message, "not found") {
				t.Fatalf("message %q, want it to contain %q", e.Message, "not found")
			}
		},
		"ProcessOutput/ChatIDEnforcement": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo secret", Background: true}, newChat())
			a.waitExit(id)
			code, _, e := a.output(id, "", newChat())
			wantCode(t, "other chat", code, http.StatusNotFound, e)
			code, _, e = a.output(id, "", "")
			wantCode(t, "no chat", code, http.StatusOK, e)
		},
		"ProcessOutput/WaitForExit": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo hello-wait && sleep 0.1"}, "")
			code, resp, e := a.output(id, "?wait=true", "")
			wantCode(t, "output", code, http.StatusOK, e)
			wantExit(t, resp, 0)
			if !strings.Contains(resp.Output, "hello-wait") {
				t.Fatalf("output %q", resp.Output)
			}
		},
		"ProcessOutput/WaitAlreadyExited": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo done"}, "")
			a.waitExit(id)
			code, resp, e := a.output(id, "?wait=true", "")
			wantCode(t, "output", code, http.StatusOK, e)
			if resp.Running || !strings.Contains(resp.Output, "done") {
				t.Fatalf("output %+v, want exited with done", resp)
			}
		},
		"ProcessOutput/WaitTimeout": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			// Coder's case gives the request a context that expires while
			// the handler waits, and reads the reply from a recorder; a
			// context cancelled before the request does the same without a
			// timer.
			ctx, cancel := context.WithCancel(testContext(t))
			cancel()
			rec := httptest.NewRecorder()
			a.handler.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", coderPrefix+"/"+id+"/output?wait=true", nil))
			var resp cOutputResponse
			wantCode(t, "output", rec.Code, http.StatusOK, cResponse{})
			decodeStrict(t, rec.Body, &resp)
			if !resp.Running {
				t.Fatalf("output %+v, want running", resp)
			}
			code, e := a.signal(id, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
			a.waitExit(id)
		},
		"ProcessOutput/ConcurrentWaiters": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			var wg sync.WaitGroup
			var resps [2]cOutputResponse
			var codes [2]int
			for i := range 2 {
				wg.Go(func() {
					codes[i], _ = a.send(testContext(t), "GET", "/"+id+"/output?wait=true", nil, "", &resps[i])
				})
			}
			code, e := a.signal(id, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
			wg.Wait()
			for i := range 2 {
				if codes[i] != http.StatusOK || resps[i].Running {
					t.Fatalf("waiter %d: %d %+v, want 200 and exited", i, codes[i], resps[i])
				}
			}
		},

		// TestSignalProcess
		"SignalProcess/KillRunning": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			code, e := a.signal(id, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
			a.waitExit(id)
		},
		"SignalProcess/TerminateRunning": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			code, e := a.signal(id, "terminate", "")
			wantCode(t, "terminate", code, http.StatusOK, e)
			a.waitExit(id)
		},
		"SignalProcess/NonexistentProcess": func(t *testing.T) {
			a := newCoderAgent(t)
			code, e := a.signal("nonexistent-id-12345", "kill", "")
			wantCode(t, "kill", code, http.StatusNotFound, e)
		},
		"SignalProcess/AlreadyExitedProcess": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo done"}, "")
			a.waitExit(id)
			code, e := a.signal(id, "kill", "")
			wantCode(t, "kill", code, http.StatusConflict, e)
		},
		"SignalProcess/EmptySignal": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			code, e := a.signal(id, "", "")
			wantCode(t, "empty", code, http.StatusBadRequest, e)
			if !strings.Contains(e.Message, "Signal is required") {
				t.Fatalf("message %q, want it to contain %q", e.Message, "Signal is required")
			}
			code, e = a.signal(id, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
		},
		"SignalProcess/InvalidSignal": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			code, e := a.signal(id, "SIGFOO", "")
			wantCode(t, "SIGFOO", code, http.StatusBadRequest, e)
			if !strings.Contains(e.Message, "Unsupported signal") {
				t.Fatalf("message %q, want it to contain %q", e.Message, "Unsupported signal")
			}
			code, e = a.signal(id, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
		},

		// TestProcessLifecycle
		"ProcessLifecycle/StartWaitCheckOutput": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo lifecycle-test && echo second-line"}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			if !strings.Contains(resp.Output, "lifecycle-test") || !strings.Contains(resp.Output, "second-line") {
				t.Fatalf("output %q", resp.Output)
			}
		},
		"ProcessLifecycle/NonZeroExitCode": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "exit 42"}, "")
			wantExit(t, a.waitExit(id), 42)
		},
		"ProcessLifecycle/StartSignalVerifyExit": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "sleep 300", Background: true}, "")
			code, resp, e := a.output(id, "", "")
			wantCode(t, "output", code, http.StatusOK, e)
			if !resp.Running {
				t.Fatalf("output %+v, want running", resp)
			}
			code, e = a.signal(id, "kill", "")
			wantCode(t, "kill", code, http.StatusOK, e)
			if resp := a.waitExit(id); resp.ExitCode == nil {
				t.Fatalf("output %+v, want an exit code", resp)
			}
		},
		"ProcessLifecycle/OutputExceedsBuffer": func(t *testing.T) {
			a := newCoderAgent(t)
			lines := (agentproc.DefaultHeadBytes+agentproc.DefaultTailBytes)/50 + 500
			id := a.mustStart(cStartRequest{Command: fmt.Sprintf(
				`for i in $(seq 1 %d); do echo "line-$i-padding-to-make-this-longer-than-fifty-characters-total"; done`, lines)}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			tr := resp.Truncated
			if tr == nil || tr.Strategy != "head_tail" || tr.OmittedBytes <= 0 || tr.OriginalBytes <= tr.RetainedBytes {
				t.Fatalf("truncated %+v, want head_tail with bytes omitted", tr)
			}
			if !strings.Contains(resp.Output, "... [omitted") {
				t.Fatalf("output lacks Coder's omission marker")
			}
		},
		"ProcessLifecycle/StderrCaptured": func(t *testing.T) {
			a := newCoderAgent(t)
			id := a.mustStart(cStartRequest{Command: "echo stdout-msg && echo stderr-msg >&2"}, "")
			resp := a.waitExit(id)
			wantExit(t, resp, 0)
			if !strings.Contains(resp.Output, "stdout-msg") || !strings.Contains(resp.Output, "stderr-msg") {
				t.Fatalf("output %q", resp.Output)
			}
		},
	}
	if len(cases) != 46 {
		t.Fatalf("%d cases, want Coder's 46", len(cases))
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t)
		})
	}
}
