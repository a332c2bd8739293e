package httpapi

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentproc/agentproc"
)

// TestErrorStatus maps every sentinel of the core, wrapped as the core
// wraps them, to its status. The core's errors.go is parsed for its
// exported Err* variables, so a sentinel added there without a case here
// fails the test instead of falling through to 500 unnoticed.
func TestErrorStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sentinel string // the agentproc variable, "" for another error
		err      error
		want     int
	}{
		{"ErrNotFound", agentproc.ErrNotFound, http.StatusNotFound},
		{"ErrNotRunning", agentproc.ErrNotRunning, http.StatusConflict},
		{"ErrRunning", agentproc.ErrRunning, http.StatusConflict},
		{"ErrClosed", agentproc.ErrClosed, http.StatusServiceUnavailable},
		{"ErrTooManyProcesses", agentproc.ErrTooManyProcesses, http.StatusTooManyRequests},
		{"ErrUnsupportedSignal", agentproc.ErrUnsupportedSignal, http.StatusBadRequest},
		{"ErrInvalidRequest", agentproc.ErrInvalidRequest, http.StatusBadRequest},
		{"ErrNoStdin", agentproc.ErrNoStdin, http.StatusConflict},
		{"ErrStdinClosed", agentproc.ErrStdinClosed, http.StatusConflict},
		{"ErrNoTTY", agentproc.ErrNoTTY, http.StatusConflict},
		{"ErrUnsupported", agentproc.ErrUnsupported, http.StatusNotImplemented},
		{"ErrExited", agentproc.ErrExited, http.StatusConflict},
		{"ErrKeyConflict", agentproc.ErrKeyConflict, http.StatusConflict},
		// Anything else that says unsupported, such as a caller's own.
		{"", errors.ErrUnsupported, http.StatusNotImplemented},
		{"", errors.New("fork: resource temporarily unavailable"), http.StatusInternalServerError},
	}
	var covered []string
	for _, tc := range cases {
		if tc.sentinel != "" {
			covered = append(covered, tc.sentinel)
		}
		err := fmt.Errorf("agentproc: some step: %w", tc.err)
		if got := errorFor(err, "id").StatusCode; got != tc.want {
			t.Errorf("errorFor(%v) = %d, want %d", err, got, tc.want)
		}
	}
	slices.Sort(covered)
	if want := coreSentinels(t); !slices.Equal(covered, want) {
		t.Errorf("sentinels with a case: got %v, want every exported one of errors.go: %v", covered, want)
	}
}

// coreSentinels returns the exported Err* variables declared in the core
// package's errors.go, sorted.
func coreSentinels(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../errors.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
					names = append(names, n.Name)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}
