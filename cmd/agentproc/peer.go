package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"

	"github.com/agentproc/agentproc"
)

// confinedPeerKey is the context key under which a connection from a
// confined peer carries the reason (see refuseConfinedPeers).
type confinedPeerKey struct{}

// refuseConfinedPeers makes srv answer every request on a Unix socket
// connection whose peer process is confined beyond serve
// (agentproc.MoreConfined: a sandboxed tree, whatever environment it
// execs with) with 403, and run nothing: serve runs commands unconfined
// (or under its own policy), so a sandboxed tree that reached the socket,
// which shares the user, would otherwise run through it what its sandbox
// refuses. The peer is judged once, when the connection is accepted, by
// the PID the kernel recorded at connect (peerPID). Where the OS cannot
// say (MoreConfined's ErrUnsupported: no agentproc sandbox is verified
// there) and on TCP (a token is needed there) nothing is refused.
func refuseConfinedPeers(srv *http.Server) {
	next := srv.Handler
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		uc, ok := c.(*net.UnixConn)
		if !ok {
			return ctx
		}
		why := confinedPeer(uc)
		if why == "" {
			return ctx
		}
		return context.WithValue(ctx, confinedPeerKey{}, why)
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why, ok := r.Context().Value(confinedPeerKey{}).(string); ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]string{
				"message": "agentproc serve takes no requests from a sandboxed process.",
				"detail":  "the connecting process is confined beyond this server: " + why,
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// confinedPeer returns why the peer of c is refused, "" when it is not.
func confinedPeer(c *net.UnixConn) string {
	pid, gone, err := peerPID(c)
	if errors.Is(err, errors.ErrUnsupported) {
		return ""
	}
	if err != nil {
		return "its process is unknown: " + err.Error()
	}
	why, err := agentproc.MoreConfined(pid)
	// After the check: a peer that exited before it (a tree's process that
	// connected, then left its PID to an unconfined one) was not what
	// MoreConfined read.
	exited := gone()
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return ""
	case err != nil:
		return err.Error()
	case why == "" && exited:
		return "the process that connected is gone (its PID may name another process now)"
	}
	return why
}
