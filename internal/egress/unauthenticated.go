package egress

import (
	"container/list"
	"net"
	"sync"
)

// unauthenticated is a listener's connections that have not presented
// its token yet, in the order they came, bounded: when another comes past
// the bound, the oldest is given back to be closed. Anything on the
// machine can connect to a listener on the host's loopback, so a slot
// taken by such a connection must cost the tree nothing: the tree's own
// clients send their request (with the token) as soon as they connect,
// so a flood of idle connections closes its own oldest ones, not the
// tree's, which leave the pool at once (admit).
type unauthenticated struct {
	mu    sync.Mutex
	order *list.List // of net.Conn, oldest first
	at    map[net.Conn]*list.Element
	bound int
}

func newUnauthenticated(bound int) unauthenticated {
	return unauthenticated{order: list.New(), at: map[net.Conn]*list.Element{}, bound: bound}
}

// add puts c in the pool and returns the connection it pushed out, if
// any, for the caller to close (not under the lock).
func (u *unauthenticated) add(c net.Conn) (oldest net.Conn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.order.Len() >= u.bound {
		oldest = u.order.Remove(u.order.Front()).(net.Conn)
		delete(u.at, oldest)
	}
	u.at[c] = u.order.PushBack(c)
	return oldest
}

// remove takes c out of the pool and reports whether it was there: false
// when it was pushed out (and is being closed) or never added.
func (u *unauthenticated) remove(c net.Conn) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.at[c]
	if ok {
		u.order.Remove(e)
		delete(u.at, c)
	}
	return ok
}
