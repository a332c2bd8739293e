package egress

import (
	"fmt"
	"sync"
	"time"
)

// A tree that opens tunnels to a listed host that sends much (a
// registry's tarball) and never reads them makes the proxy hold the
// host's memory outside the tree's cgroup: each upstream socket's receive
// queue, which autotuning grew towards tcp_rmem's maximum while the data
// flowed, and the relay buffer blocked in its write to the tree
// (thirteenth attack review, "Stalled tunnels hold the host's memory").
// A fixed SO_RCVBUF would bound it but caps every download at its window
// a round trip (the sixth mend's, taken back), and TCP_WINDOW_CLAMP
// bounded nothing. So the bytes are counted only where a tunnel stalls:
// a relay's write to its destination carries a deadline
// (Config.StallTimeout); when it expires, the relay records what its
// source socket holds or may hold unread, what its destination socket
// holds unsent and what it holds itself as its share of the listener's
// account (writeGuarded, relay_linux.go), and the relay that finds the
// account past the budget closes its tunnel, with a denial that says why. A write that completes takes
// the relay's share out. Nothing runs while data flows but the deadline
// each write sets, and no ticker runs at all.

// defaultUnreadBudget is Policy.UnreadBudget's default: twice what one
// tunnel's upstream socket may hold where autotuning is allowed most
// (tcp_rmem's maximum, 32 MiB on this project's machines; 6 MiB on a
// stock kernel), so that one slow but reading client is never closed,
// and a sixteenth of what MaxConns stalled tunnels held before the bound
// (about 1 GiB).
const defaultUnreadBudget = 64 << 20

// defaultStallTimeout is Config.StallTimeout's default.
const defaultStallTimeout = time.Second

// RuleUnreadPrefix begins the rule of a tunnel closed because the tree's
// tunnels held more than Policy.UnreadBudget unread; the rest names the
// budget (RuleUnread). Unread by the tree or by the hosts: a host that
// reads nothing of an upload stalls its direction as a tree that reads
// nothing of a download does, and the text said the tree's alone, which
// told the model to read what it was sending (seventeenth attack review).
const RuleUnreadPrefix = "closed: the tree's tunnels held more than "

// RuleUnread is the rule of a tunnel closed for the budget b.
func RuleUnread(b int64) string {
	size := fmt.Sprintf("%d bytes", b)
	if b%(1<<20) == 0 {
		size = fmt.Sprintf("%d MiB", b>>20)
	}
	return RuleUnreadPrefix + size + " unread (by the tree, or by hosts it sends to)"
}

// unreadAccount is the bytes a listener's stalled relays hold unread.
type unreadAccount struct {
	mu     sync.Mutex
	total  int64
	budget int64
}

// stallShare is one relay direction's share of its listener's account.
type stallShare struct {
	acct *unreadAccount
	n    int64
}

// record sets the share to n bytes and reports whether the account is
// then within its budget. A share that passes the budget is taken out
// again: its relay closes its tunnel, which frees those bytes.
func (s *stallShare) record(n int64) bool {
	a := s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total += n - s.n
	s.n = n
	if a.total <= a.budget {
		return true
	}
	a.total -= s.n
	s.n = 0
	return false
}

// clear takes the share out of the account: its relay wrote what it held
// (the tree reads again) or ended.
func (s *stallShare) clear() {
	if s == nil || s.n == 0 {
		return
	}
	s.acct.mu.Lock()
	s.acct.total -= s.n
	s.acct.mu.Unlock()
	s.n = 0
}
