package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentproc/agentproc"
	"golang.org/x/xerrors"
)

// Client calls the routes of a handler made by NewHandler. Its zero value is
// not usable: URL must be set. A Client is safe for concurrent use as long as
// its fields are not changed.
//
// A reply with a status other than 200 is returned as an *Error holding the
// status code and the server's message; use errors.As to get it. Failures to
// reach the server are returned as they come from the HTTP client.
type Client struct {
	// URL is where the handler is mounted, such as
	// "http://127.0.0.1:8080/processes". A trailing slash is ignored.
	URL string
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Header is added to every request: the owner header, or whatever the
	// server's WithAuthorize hook reads.
	Header http.Header
}

// OutputOptions selects what Client.Output asks for. The zero value asks for
// a snapshot of the whole retained output, without waiting.
type OutputOptions struct {
	// Wait blocks until the process exits, the server's cap passes, or
	// Timeout passes (?wait=true).
	Wait bool
	// WaitFor, when not nil, blocks until a line of output matches it
	// (?wait_for=), with the same bounds as Wait. Use one of Wait and
	// WaitFor.
	WaitFor *regexp.Regexp
	// Timeout bounds the wait on the server (?timeout=); 0 leaves only the
	// server's cap. The ctx passed to Output bounds it on the client.
	Timeout time.Duration
	// Offset, when not nil, asks for a read from that absolute offset
	// (?offset=) instead of a snapshot; Output.Position is then set.
	Offset *int64
	// WaitPort, when not nil, blocks until the process's tree listens on
	// that port, 0 meaning any (?wait_port=); Output.Port is then set. Use
	// one of Wait, WaitFor and WaitPort.
	WaitPort *int
	// Plain asks for terminal-clean text (?plain=true; see
	// agentproc.PlainText); WaitFor then matches rendered lines.
	Plain bool
	// Follow, with Offset, blocks until there is output after Offset, the
	// process exits or is waiting for input, or the wait's bounds pass
	// (?follow=true; agentproc.Process.WaitOutput). A client that follows
	// a process reads from Next again and again; logs -f does.
	Follow bool
	// Since, when not zero, asks for a read from the output written at or
	// after that time (?since=; agentproc.Process.OffsetAt, coarse), or
	// from Offset if that is later; Output.Position is then set.
	Since time.Time
}

// Start starts a process (POST /start).
func (c *Client) Start(ctx context.Context, req StartRequest) (StartResponse, error) {
	var resp StartResponse
	err := c.do(ctx, http.MethodPost, "/start", nil, req, &resp)
	return resp, err
}

// List returns the caller's processes (GET /list).
func (c *Client) List(ctx context.Context) ([]Process, error) {
	var resp ListResponse
	err := c.do(ctx, http.MethodGet, "/list", nil, nil, &resp)
	return resp.Processes, err
}

// Get returns one process (GET /{id}).
func (c *Client) Get(ctx context.Context, id string) (Process, error) {
	var resp Process
	err := c.do(ctx, http.MethodGet, "/"+url.PathEscape(id), nil, nil, &resp)
	return resp, err
}

// Output returns a process's output (GET /{id}/output).
func (c *Client) Output(ctx context.Context, id string, opts OutputOptions) (Output, error) {
	q := url.Values{}
	if opts.Wait {
		q.Set("wait", "true")
	}
	if opts.WaitFor != nil {
		q.Set("wait_for", opts.WaitFor.String())
	}
	if opts.Timeout > 0 {
		q.Set("timeout", opts.Timeout.String())
	}
	if opts.Offset != nil {
		q.Set("offset", strconv.FormatInt(*opts.Offset, 10))
	}
	if opts.WaitPort != nil {
		q.Set("wait_port", strconv.Itoa(*opts.WaitPort))
	}
	if opts.Plain {
		q.Set("plain", "true")
	}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if !opts.Since.IsZero() {
		q.Set("since", opts.Since.Format(time.RFC3339Nano))
	}
	var resp Output
	err := c.do(ctx, http.MethodGet, "/"+url.PathEscape(id)+"/output", q, nil, &resp)
	return resp, err
}

// Signal sends sig to a process's tree (POST /{id}/signal).
func (c *Client) Signal(ctx context.Context, id string, sig agentproc.Signal) error {
	var resp Response
	return c.do(ctx, http.MethodPost, "/"+url.PathEscape(id)+"/signal", nil, SignalRequest{Signal: sig}, &resp)
}

// WriteStdin writes to a process's stdin and optionally closes it
// (POST /{id}/stdin).
func (c *Client) WriteStdin(ctx context.Context, id string, req StdinRequest) (StdinResponse, error) {
	var resp StdinResponse
	err := c.do(ctx, http.MethodPost, "/"+url.PathEscape(id)+"/stdin", nil, req, &resp)
	return resp, err
}

// maxErrorBody bounds how much of an error reply is read: enough for any
// reply this package writes, and a bound on what a proxy's page can cost.
const maxErrorBody = 64 << 10

// do sends one request and decodes a 200 reply into out, or returns the
// reply as an *Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := strings.TrimSuffix(c.URL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return xerrors.Errorf("httpapi: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return xerrors.Errorf("httpapi: new request: %w", err)
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return xerrors.Errorf("httpapi: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return readError(res)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return xerrors.Errorf("httpapi: decode %s %s reply: %w", method, path, err)
	}
	return nil
}

// readError turns a non-200 reply into an *Error. A body that is not this
// package's JSON (a proxy's error page, the mux's plain-text 404) becomes
// the message, so the caller still learns what the server said.
func readError(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	e := &Error{}
	if err := json.Unmarshal(b, e); err != nil || e.Message == "" {
		e = &Error{Message: strings.TrimSpace(string(b))}
		if e.Message == "" {
			e.Message = http.StatusText(res.StatusCode)
		}
	}
	e.StatusCode = res.StatusCode
	return e
}
