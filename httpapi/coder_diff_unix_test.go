//go:build unix

package httpapi_test

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// The tests below pin the differences WithCoderCompat removes, beyond what
// Coder's own cases check.

func TestCoderChatScoping(t *testing.T) {
	t.Parallel()
	a := newCoderAgent(t)
	chat, other := uuid.NewString(), uuid.NewString()

	id := a.mustStart(cStartRequest{Command: `printf %s "$CODER_CHAT_ID"`}, chat)
	if resp := a.waitExit(id); resp.Output != chat {
		t.Fatalf("CODER_CHAT_ID = %q, want %q", resp.Output, chat)
	}
	unowned := a.mustStart(cStartRequest{Command: `printf %s "${CODER_CHAT_ID-unset}"`}, "")
	if resp := a.waitExit(unowned); resp.Output != "unset" {
		t.Fatalf("without a chat CODER_CHAT_ID = %q, want it unset", resp.Output)
	}

	// A chat lists its own processes only, but reaches processes without
	// a chat by ID.
	if got := a.list(other).Processes; len(got) != 0 {
		t.Fatalf("other chat lists %+v, want none", got)
	}
	if code, _, e := a.output(unowned, "", other); code != http.StatusOK {
		t.Fatalf("chat reading an unowned process: %d %+v, want 200", code, e)
	}
	if code, e := a.signal(unowned, "kill", other); code != http.StatusConflict {
		t.Fatalf("chat signalling an exited unowned process: %d %+v, want 409 (reached, not running)", code, e)
	}
	if code, e := a.signal(id, "kill", other); code != http.StatusNotFound {
		t.Fatalf("chat signalling another chat's process: %d %+v, want 404", code, e)
	}

	// An invalid chat header counts as none: it sees everything.
	if got := a.list("not-a-uuid").Processes; len(got) != 2 {
		t.Fatalf("invalid chat lists %d, want all 2", len(got))
	}
	// A chat is matched as a UUID, whatever its case.
	if got := a.list(strings.ToUpper(chat)).Processes; len(got) != 1 || got[0].ID != id {
		t.Fatalf("upper-case chat lists %+v, want %s", got, id)
	}
}

func TestCoderCommandsAreVerbatim(t *testing.T) {
	t.Parallel()
	a := newCoderAgent(t) // a default Manager: background detection on
	id := a.mustStart(cStartRequest{Command: "true &"}, "")
	resp := a.waitExit(id)
	p := findProcess(a.list("").Processes, id)
	if resp.Command != "true &" || p == nil || p.Command != "true &" || p.Background {
		t.Fatalf("output command %q, listed %+v; want the command as sent and background false", resp.Command, p)
	}
}

func TestCoderSignalledExitCode(t *testing.T) {
	t.Parallel()
	a := newCoderAgent(t)
	id := a.mustStart(cStartRequest{Command: "exec sleep 300", Background: true}, "")
	if code, e := a.signal(id, "kill", ""); code != http.StatusOK {
		t.Fatalf("kill: %d %+v", code, e)
	}
	wantExit(t, a.waitExit(id), -1)
	if p := findProcess(a.list("").Processes, id); p == nil || p.ExitCode == nil || *p.ExitCode != -1 {
		t.Fatalf("listed %+v, want exit code -1", p)
	}
	// The default handler keeps 128+N.
	s := newTestServer(t, nil, nil)
	c := s.client()
	did := start(t, c, httpapi.StartRequest{Command: "exec sleep 300"})
	if err := c.Signal(testContext(t), did, agentproc.SignalKill); err != nil {
		t.Fatal(err)
	}
	out, err := c.Output(testContext(t), did, httpapi.OutputOptions{Wait: true})
	if err != nil || out.ExitCode == nil || *out.ExitCode != 137 {
		t.Fatalf("default handler: %+v, %v; want exit code 137", out, err)
	}
}

func TestCoderOutputRendering(t *testing.T) {
	t.Parallel()
	a := newCoderAgent(t, agentproc.WithOutputLimits(64, 64, 0))

	// Only a line cut: truncated is null, and the line ends with Coder's
	// suffix at Coder's length.
	b := newCoderAgent(t)
	longID := b.mustStart(cStartRequest{Command: `head -c 3000 /dev/zero | tr '\0' x; echo; echo short`}, "")
	resp := b.waitExit(longID)
	first, rest, _ := strings.Cut(resp.Output, "\n")
	if resp.Truncated != nil || len(first) != 2048 || !strings.HasSuffix(first, " ... [truncated]") || rest != "short\n" {
		t.Fatalf("got truncated %+v, first line %d bytes ending %q, rest %q; want null, 2048 bytes ending with Coder's suffix",
			resp.Truncated, len(first), first[max(0, len(first)-20):], rest)
	}
	if resp.Command != `head -c 3000 /dev/zero | tr '\0' x; echo; echo short` {
		t.Fatalf("command %q, want the command", resp.Command)
	}

	// The middle dropped: Coder's marker, and retained_bytes is the length
	// of the text sent.
	id := a.mustStart(cStartRequest{Command: `seq 1 1000`}, "")
	resp = a.waitExit(id)
	tr := resp.Truncated
	if tr == nil || tr.Strategy != "head_tail" || tr.RetainedBytes != len(resp.Output) || tr.OriginalBytes != 3893 ||
		!strings.Contains(resp.Output, "\n\n... [omitted ") || !strings.Contains(resp.Output, " bytes] ...\n\n") ||
		!strings.HasPrefix(resp.Output, "1\n2\n") || !strings.HasSuffix(resp.Output, "999\n1000\n") {
		t.Fatalf("got %+v, output %q; want head, Coder's marker, tail, retained_bytes = len(output)", tr, resp.Output)
	}
	if want := "\n\n... [omitted " + strconv.Itoa(tr.OmittedBytes) + " bytes] ...\n\n"; !strings.Contains(resp.Output, want) {
		t.Fatalf("output %q lacks %q", resp.Output, want)
	}
	if tr.OmittedBytes != tr.OriginalBytes-128 {
		t.Fatalf("omitted %d, want %d (all but the 64+64 kept)", tr.OmittedBytes, tr.OriginalBytes-128)
	}
}

func TestCoderStatusCodes(t *testing.T) {
	t.Parallel()
	a := newCoderAgent(t)

	code, _, e := a.start(cStartRequest{Command: "true", WorkDir: filepath.Join(t.TempDir(), "missing")}, "")
	wantCode(t, "missing workdir", code, http.StatusInternalServerError, e)

	id := a.mustStart(cStartRequest{Command: "exec sleep 300"}, "")
	code, e = a.signal(id, "interrupt", "")
	wantCode(t, "interrupt", code, http.StatusBadRequest, e)
	if !strings.Contains(e.Message, "Unsupported signal") {
		t.Fatalf("message %q", e.Message)
	}

	// Only "true" waits; anything else reads at once, so these return
	// while the process still runs.
	for _, q := range []string{"?wait=1", "?wait=TRUE", "?wait=yes", "?wait_for=x&timeout=bad&offset=-1"} {
		code, resp, e := a.output(id, q, "")
		if code != http.StatusOK || !resp.Running {
			t.Fatalf("output%s: %d %+v %+v, want 200 at once, running", q, code, resp, e)
		}
	}

	// The extension routes do not exist under the profile: 404 as Coder's
	// router (chi) answers a path it does not route, 405 for one it routes
	// under another method.
	for _, r := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/" + id, http.StatusNotFound},
		{"POST", "/" + id + "/stdin", http.StatusNotFound},
		{"GET", "/" + id + "/other", http.StatusNotFound},
		{"DELETE", "/" + id + "/other", http.StatusNotFound},
		{"POST", "/" + id + "/output", http.StatusMethodNotAllowed},
		{"GET", "/" + id + "/signal", http.StatusMethodNotAllowed},
		{"GET", "/start", http.StatusMethodNotAllowed},
		{"POST", "/list", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequestWithContext(testContext(t), r.method, a.srv.URL+coderPrefix+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != r.want {
			t.Errorf("%s %s: %d, want %d", r.method, r.path, res.StatusCode, r.want)
		}
	}

	if code, e := a.signal(id, "kill", ""); code != http.StatusOK {
		t.Fatalf("kill: %d %+v", code, e)
	}
	a.waitExit(id)
	if err := a.m.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, e = a.start(cStartRequest{Command: "true"}, "")
	wantCode(t, "closed manager", code, http.StatusInternalServerError, e)
}

// TestCoderStillRefusesBrowsers checks that the profile's exemption from
// the JSON Content-Type rule does not open it to web pages.
func TestCoderStillRefusesBrowsers(t *testing.T) {
	t.Parallel()
	a := newCoderAgent(t)
	s := &testServer{m: a.m, srv: a.srv}
	wantError(t, s.raw(t, "POST", coderPrefix+"/start", `{"command":"echo hi"}`, crossSite...), http.StatusForbidden)
	wantError(t, s.raw(t, "POST", coderPrefix+"/start", `{"command":"echo hi"}`, "Host", "evil.example"), http.StatusForbidden)
	wantNothingStarted(t, s)
	// A same-origin page and Coder's client, with or without a type, pass.
	if r := s.raw(t, "POST", coderPrefix+"/start", `{"command":"echo hi"}`, "Content-Type", "text/plain", "Sec-Fetch-Site", "same-origin"); r.status != http.StatusOK {
		t.Fatalf("same-origin text/plain: %d %s, want 200", r.status, r.body)
	}
}

func TestDefaultHandlerKey(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil, nil)
	c := s.client()
	ctx := testContext(t)
	req := httpapi.StartRequest{Command: "exec sleep 300", Key: "build-1"}
	first, err := c.Start(ctx, req)
	if err != nil || !first.Started {
		t.Fatalf("first: %+v, %v; want started", first, err)
	}
	second, err := c.Start(ctx, req)
	if err != nil || second.Started || second.ID != first.ID {
		t.Fatalf("second: %+v, %v; want id %s, started false", second, err, first.ID)
	}
	_, err = c.Start(ctx, httpapi.StartRequest{Command: "true", Key: "build-1"})
	wantStatus(t, err, http.StatusConflict)
	// Another owner has its own keys.
	third, err := s.client(httpapi.DefaultOwnerHeader, "b").Start(ctx, req)
	if err != nil || !third.Started || third.ID == first.ID {
		t.Fatalf("other owner: %+v, %v; want a new process", third, err)
	}
}

// TestCoderConcurrentTokenStarts checks that concurrent starts with one new
// token from one chat start one process, and exactly one reply says so.
func TestCoderConcurrentTokenStarts(t *testing.T) {
	t.Parallel()
	a := newCoderAgent(t)
	chat := uuid.NewString()
	const n = 8
	var wg sync.WaitGroup
	resps := make([]cStartResponse, n)
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			codes[i], resps[i], _ = a.start(cStartRequest{Command: "exec sleep 300", ClientToken: "tok"}, chat)
		})
	}
	wg.Wait()
	started := 0
	for i := range n {
		if codes[i] != http.StatusOK || resps[i].ID != resps[0].ID || resps[i].Started == resps[i].Attached {
			t.Fatalf("reply %d: %d %+v, want 200 for id %s, started or attached", i, codes[i], resps[i], resps[0].ID)
		}
		if resps[i].Started {
			started++
		}
	}
	if started != 1 || len(a.m.List()) != 1 {
		t.Fatalf("%d replies say started, %d processes; want 1 and 1", started, len(a.m.List()))
	}
}
