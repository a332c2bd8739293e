package agentproc

import (
	"context"
	"sort"
	"sync"
	"time"
)

// EventType names what happened to a process.
type EventType string

// The events a Manager publishes, in the order a process goes through them.
const (
	// EventStarted: the process started. Event.Info is its Info then.
	EventStarted EventType = "started"
	// EventReady: the readiness check of Request.Ready passed. Event.Port
	// is the port the tree listens on, or Event.Line the matching line.
	EventReady EventType = "ready"
	// EventAwaitingInput: the process began waiting for input (see
	// Info.AwaitingInput). Event.Line is the last, unfinished line of its
	// output, which is usually the prompt. Published again each time the
	// process starts waiting anew.
	EventAwaitingInput EventType = "awaiting_input"
	// EventDenied: the sandbox refused the tree something it had not
	// refused it before (see Info.Denials). Event.Denial is the refusal,
	// with Count 1.
	EventDenied EventType = "denied"
	// EventExited: the process exited and its output is final. Event.Info
	// is its final Info.
	EventExited EventType = "exited"
	// EventDropped: retention dropped the exited process; Get no longer
	// finds it.
	EventDropped EventType = "dropped"
	// EventLost: this subscriber fell behind and Event.Lost events meant
	// for it were discarded, up to and including sequence number
	// Event.Seq. Resynchronise with List. It carries no process.
	EventLost EventType = "lost"
)

// Event is one thing that happened to one process of a Manager.
type Event struct {
	// Seq numbers the Manager's events from 1, in the order they were
	// published; a subscriber receives its events in increasing Seq.
	Seq   uint64
	Type  EventType
	ID    string
	Owner string
	// Time is when the event was published, by the Manager's clock.
	Time time.Time
	// Info is set for EventStarted and EventExited.
	Info *Info
	// Port is set for an EventReady caused by a listening port.
	Port *Port
	// Line is the matching line of an EventReady caused by
	// Request.Ready's Match, or the prompt of an EventAwaitingInput.
	Line string
	// Lost is how many events an EventLost stands for.
	Lost uint64
	// Denial is set for EventDenied.
	Denial *Denial
}

// EventBuffer is how many events a subscriber may have waiting before
// further ones are discarded for it (it then receives one EventLost), and
// how many of the Manager's latest events SubscribeAfter can replay.
const EventBuffer = 1024

// Subscribe returns a channel of the Manager's events, of every owner,
// from now on. A subscriber that does not keep up never slows a process or
// another subscriber: once EventBuffer events wait for it, further events
// are discarded for it and it receives one EventLost saying how many, after
// which it should resynchronise with List. The channel is closed when ctx
// ends, or after Close once every exit was delivered; cancel ctx to release
// a subscription that is not read to its end.
func (m *Manager) Subscribe(ctx context.Context) <-chan Event {
	return m.events.subscribe(ctx, nil, 0, false)
}

// SubscribeAfter is Subscribe, but first replays the retained events whose
// Seq is greater than after (the Manager keeps its last EventBuffer events):
// a client that reconnects passes the last Seq it saw. If some of the
// events after it are no longer retained, the replay starts with an
// EventLost counting them.
func (m *Manager) SubscribeAfter(ctx context.Context, after uint64) <-chan Event {
	return m.events.subscribe(ctx, nil, after, true)
}

// Subscribe is Manager.Subscribe restricted to the Scope's owner: it never
// carries an event of another owner's process.
func (s *Scope) Subscribe(ctx context.Context) <-chan Event {
	return s.m.events.subscribe(ctx, &s.owner, 0, false)
}

// SubscribeAfter is Manager.SubscribeAfter restricted to the Scope's owner.
// The EventLost of the replay counts only the owner's own events that are no
// longer retained, never another owner's.
func (s *Scope) SubscribeAfter(ctx context.Context, after uint64) <-chan Event {
	return s.m.events.subscribe(ctx, &s.owner, after, true)
}

// eventBus fans events out to subscribers. publish never blocks on a
// subscriber: it appends to each subscriber's bounded queue under short
// locks, and one goroutine per subscriber moves its queue to its channel.
// Its lock, a process's eventGate.mu and a subscriber's mu are ordered in
// docs/architecture.md ("Locks").
type eventBus struct {
	clock func() time.Time

	mu      sync.Mutex
	seq     uint64
	subs    map[*subscriber]struct{}
	history []Event // the last EventBuffer events, a ring once full
	histPos int     // where the next event goes once history is full
	// evicted counts, per owner, the events that fell out of history, so
	// that a scoped replay counts only its owner's losses.
	evicted map[string]*ownerLoss
	closed  bool
}

// ownerLoss is what an owner's events that fell out of the history were:
// the Seqs of the last ownerLossRing of them, and a count and the highest
// Seq of the older ones.
type ownerLoss struct {
	recent   []uint64 // ascending
	older    uint64
	olderMax uint64
}

// ownerLossRing bounds the Seqs kept per owner. A replay from before the
// oldest of them counts every older loss of the owner (an upper bound
// that still counts only the owner's events).
const ownerLossRing = 256

func (l *ownerLoss) add(seq uint64) {
	if len(l.recent) == ownerLossRing {
		l.older++
		l.olderMax = l.recent[0]
		copy(l.recent, l.recent[1:])
		l.recent = l.recent[:ownerLossRing-1]
	}
	l.recent = append(l.recent, seq)
}

// since returns how many of the owner's lost events have a Seq above
// after, and the highest such Seq.
func (l *ownerLoss) since(after uint64) (n, last uint64) {
	if l == nil {
		return 0, 0
	}
	i := sort.Search(len(l.recent), func(i int) bool { return l.recent[i] > after })
	n = uint64(len(l.recent) - i)
	if n > 0 {
		last = l.recent[len(l.recent)-1]
	}
	if after < l.olderMax {
		n += l.older
		last = max(last, l.olderMax)
	}
	return n, last
}

type subscriber struct {
	filter func(*Event) bool // nil: every event
	wake   chan struct{}     // capacity 1: "the queue changed"
	out    chan Event

	mu       sync.Mutex
	queue    []Event
	lost     uint64 // events discarded since the queue overflowed
	lostSeq  uint64 // Seq of the last discarded one
	finished bool   // the bus closed: close out once the queue is empty
}

func newEventBus(clock func() time.Time) *eventBus {
	return &eventBus{clock: clock, subs: make(map[*subscriber]struct{})}
}

// publish numbers e, stamps it and hands it to every subscriber that wants
// it. It never blocks. After close it does nothing.
func (b *eventBus) publish(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.seq++
	e.Seq = b.seq
	e.Time = b.clock()
	if len(b.history) < EventBuffer {
		b.history = append(b.history, e)
	} else {
		old := b.history[b.histPos].Owner
		if b.evicted == nil {
			b.evicted = make(map[string]*ownerLoss)
		}
		l := b.evicted[old]
		if l == nil {
			l = &ownerLoss{}
			b.evicted[old] = l
		}
		l.add(b.history[b.histPos].Seq)
		b.history[b.histPos] = e
		b.histPos = (b.histPos + 1) % EventBuffer
	}
	for s := range b.subs {
		if s.filter == nil || s.filter(&e) {
			s.offer(e)
		}
	}
}

// close ends every subscription once its queue is delivered.
func (b *eventBus) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		s.mu.Lock()
		s.finished = true
		s.mu.Unlock()
		s.poke()
	}
}

// subscribe adds a subscriber to the events of owner (nil: of every owner).
func (b *eventBus) subscribe(ctx context.Context, owner *string, after uint64, replay bool) <-chan Event {
	s := &subscriber{wake: make(chan struct{}, 1), out: make(chan Event)}
	if owner != nil {
		o := *owner
		s.filter = func(e *Event) bool { return e.Owner == o }
	}
	b.mu.Lock()
	if replay {
		b.replayLocked(s, owner, after)
	}
	if b.closed {
		s.finished = true
	} else {
		b.subs[s] = struct{}{}
	}
	b.mu.Unlock()
	go b.forward(ctx, s)
	return s.out
}

// replayLocked queues the retained events after seq for s, preceded by an
// EventLost when events after seq are no longer retained: all of them, or
// for a subscriber of one owner (owner not nil) that owner's only.
func (b *eventBus) replayLocked(s *subscriber, owner *string, after uint64) {
	oldest := b.seq - uint64(len(b.history)) + 1 // Seq of history's oldest
	var lost, lostSeq uint64
	switch {
	case owner != nil:
		lost, lostSeq = b.evicted[*owner].since(after)
	case after+1 < oldest:
		lost, lostSeq = oldest-after-1, oldest-1
	}
	// The EventLost goes into the queue itself, first, rather than into
	// s.lost: offer counts every event behind an unreported loss as lost
	// too, which would fold the retained events, and a live event published
	// before the forwarder delivered the loss, into the count.
	if lost > 0 {
		s.queue = append(s.queue, Event{Type: EventLost, Seq: lostSeq, Lost: lost})
	}
	n := len(b.history)
	for i := range n {
		e := b.history[(b.histPos+i)%n]
		if e.Seq > after && (s.filter == nil || s.filter(&e)) {
			s.offer(e)
		}
	}
}

// offer queues e, or counts it lost when the queue is full or an earlier
// loss has not been reported yet: events after a gap wait behind the
// EventLost, so the subscriber never sees a later event before learning of
// the gap.
func (s *subscriber) offer(e Event) {
	s.mu.Lock()
	if s.lost > 0 || len(s.queue) >= EventBuffer {
		s.lost++
		s.lostSeq = e.Seq
	} else {
		s.queue = append(s.queue, e)
	}
	s.mu.Unlock()
	s.poke()
}

func (s *subscriber) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next returns the event to deliver next, or ok false with done true when
// the subscription is over.
func (s *subscriber) next() (e Event, ok, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.queue) > 0:
		e = s.queue[0]
		s.queue[0] = Event{}
		s.queue = s.queue[1:]
		if len(s.queue) == 0 {
			s.queue = nil // let the backing array go
		}
		return e, true, false
	case s.lost > 0:
		e = Event{Type: EventLost, Seq: s.lostSeq, Lost: s.lost}
		s.lost = 0
		return e, true, false
	}
	return Event{}, false, s.finished
}

// forward moves s's queue to its channel until ctx ends or the bus closes.
func (b *eventBus) forward(ctx context.Context, s *subscriber) {
	defer func() {
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
		close(s.out)
	}()
	for {
		e, ok, done := s.next()
		if done {
			return
		}
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		if e.Type == EventLost {
			e.Time = b.clock()
		}
		select {
		case s.out <- e:
		case <-ctx.Done():
			return
		}
	}
}

// eventGate keeps one process's events in lifecycle order: nothing before
// EventStarted (which Start publishes once the process is registered, after
// a fast process may already have exited), and EventDropped only after
// EventExited (a zero retention drops a process in the exit path, before
// its final Info is published).
type eventGate struct {
	mu      sync.Mutex
	started bool
	exited  bool
	held    []Event
	drop    bool // EventDropped waits for EventExited
}

// emit publishes e for p, or holds it until the events that must come
// before it are out.
func (p *Process) emit(e Event) {
	e.ID, e.Owner = p.id, p.owner
	g := &p.events
	g.mu.Lock()
	defer g.mu.Unlock()
	switch e.Type {
	case EventStarted:
		g.started = true
		p.m.events.publish(e)
		for _, h := range g.held {
			p.emitLocked(h)
		}
		g.held = nil
		return
	case EventDropped:
		if !g.exited {
			g.drop = true
			return
		}
	}
	if !g.started {
		g.held = append(g.held, e)
		return
	}
	p.emitLocked(e)
}

func (p *Process) emitLocked(e Event) {
	g := &p.events
	if e.Type == EventExited {
		g.exited = true
		p.m.events.publish(e)
		if g.drop {
			g.drop = false
			p.m.events.publish(Event{Type: EventDropped, ID: p.id, Owner: p.owner})
		}
		return
	}
	p.m.events.publish(e)
}

// emitInfo publishes an event carrying p's current Info.
func (p *Process) emitInfo(t EventType) {
	info := p.Info()
	p.emit(Event{Type: t, Info: &info})
}
