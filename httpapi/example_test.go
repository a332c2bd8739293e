package httpapi_test

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// A handler that only a holder of a bearer token can use. The token is
// compared in constant time, so timing does not reveal how much of a guess
// was right. The owner returned scopes what each caller sees; one token here
// means one owner.
func ExampleWithAuthorize_bearerToken() {
	const token = "s3cret-token-from-your-config"
	authorize := func(r *http.Request) (string, error) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return "", errors.New("missing or wrong bearer token")
		}
		return "agent", nil
	}

	m := agentproc.New()
	defer m.Close()
	srv := httptest.NewServer(httpapi.NewHandler(m, httpapi.WithAuthorize(authorize)))
	defer srv.Close()
	ctx := context.Background()

	wrong := &httpapi.Client{URL: srv.URL, Header: http.Header{"Authorization": {"Bearer guess"}}}
	_, err := wrong.Start(ctx, httpapi.StartRequest{Command: "echo never runs"})
	if e, ok := errors.AsType[*httpapi.Error](err); ok {
		fmt.Println("wrong token:", e.StatusCode)
	}

	right := &httpapi.Client{URL: srv.URL, Header: http.Header{"Authorization": {"Bearer " + token}}}
	resp, err := right.Start(ctx, httpapi.StartRequest{Command: "echo hello"})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := right.Output(ctx, resp.ID, httpapi.OutputOptions{Wait: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("right token:", strings.TrimSpace(out.Output))
	// Output:
	// wrong token: 401
	// right token: hello
}
