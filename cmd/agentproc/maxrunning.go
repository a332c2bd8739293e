package main

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/agentproc/agentproc"
	"github.com/agentproc/agentproc/httpapi"
)

// serve's --max-running caps each owner's running processes, so one agent
// in a loop cannot take the server's memory from the others (each process
// holds its output buffers); agentproc.WithMaxRunning would cap them all
// together.

// runningCap serialises the starts of each owner, so that the count and
// the start are one step and concurrent starts cannot pass the cap
// together; a start request returns once the process runs.
type runningCap struct {
	m     *agentproc.Manager
	max   int
	token string // the bearer token, when serve has one
	next  http.Handler

	mu     sync.Mutex            // guards owners
	owners map[string]*ownerLock // owners with a start under way
}

// ownerLock serialises one owner's starts; it is dropped from owners once
// no start holds or waits for it, so the map never outgrows the starts in
// flight.
type ownerLock struct {
	mu    sync.Mutex
	users int // starts holding or waiting for mu; guarded by runningCap.mu
}

// capRunning returns next with starts beyond max running processes per
// owner refused with 429; max 0 returns next.
func capRunning(m *agentproc.Manager, max int, token string, next http.Handler) http.Handler {
	if max == 0 {
		return next
	}
	return &runningCap{m: m, max: max, token: token, next: next, owners: map[string]*ownerLock{}}
}

func (c *runningCap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	isStart := r.Method == http.MethodPost && (r.URL.Path == "/start" || r.URL.Path == "/api/v0/processes/start")
	// A request without the token is left to the handler, which refuses
	// it: the cap must not tell a stranger how much runs.
	if !isStart || (c.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+c.token)) != 1) {
		c.next.ServeHTTP(w, r)
		return
	}
	owner := r.Header.Get(httpapi.DefaultOwnerHeader)
	c.mu.Lock()
	ol := c.owners[owner]
	if ol == nil {
		ol = new(ownerLock)
		c.owners[owner] = ol
	}
	ol.users++
	c.mu.Unlock()
	ol.mu.Lock()
	defer func() {
		ol.mu.Unlock()
		c.mu.Lock()
		if ol.users--; ol.users == 0 {
			delete(c.owners, owner)
		}
		c.mu.Unlock()
	}()
	running := 0
	for _, info := range c.m.Scope(owner).List() {
		if info.Running {
			running++
		}
	}
	if running >= c.max {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(httpapi.Error{Message: fmt.Sprintf(
			"%d processes of this owner are running, the most serve --max-running allows; stop one (agentproc stop ID) or wait for one to exit", running)})
		return
	}
	c.next.ServeHTTP(w, r)
}
