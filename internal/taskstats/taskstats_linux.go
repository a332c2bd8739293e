package taskstats

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// Limits on what a Listener keeps. below has an entry per process that
// has seen a child exit and has not exited itself (init and the long-lived
// daemons, which adopt and reap the machine's orphans), ends one per child
// of this process that has exited and not been asked for (a host's own
// children started outside agentproc). Past maxBelow the Listener starts
// over as after a lost record; past maxEnds it forgets the older half.
const (
	maxBelow = 1 << 16
	maxEnds  = 1 << 12
	// rcvBuf is the receive buffer asked for: about 4,000 records, a
	// burst of exits the reader has not been scheduled to read yet.
	rcvBuf = 4 << 20
	// batchDelay is how long the reader lets records queue after reading
	// what was there, unless a Peak asks, so that a busy machine's exits
	// wake this process at most once per batchDelay.
	batchDelay = 100 * time.Millisecond
	// lingerDelay is how long the Listener stays registered after its
	// last child is done: a loop of starts keeps it, an idle host stops
	// receiving the machine's exits (a record costs it CPU even unread).
	lingerDelay = 250 * time.Millisecond
)

// Mark is a point in a Listener's stream of records, taken before a child
// starts: only records read after it can be that child's.
type Mark struct {
	epoch uint64 // the Listener's epoch: a lost record ends it
	seq   uint64 // records folded before the mark
}

// Listener reads the exit records of every task on the machine and keeps,
// for each child of this process that has exited, the largest memory
// high-water mark of it and of the descendants it reaped (in bytes). Use
// Open to make one and Close to stop it; each child is framed by Mark
// before its start and Done once its Peak is taken or not wanted.
type Listener struct {
	fd     int // the netlink socket, blocking
	stop   int // an eventfd Close writes to end the reader's poll
	family uint16
	self   uint32 // this process's PID: its children's records end a tree
	done   chan struct{}
	// closing ends the reader's pause between batches for good (Close).
	closing chan struct{}
	cpus    string // the CPU list registered for
	// regMu orders registering and deregistering (a Mark that must
	// register first waits for it: records go to this socket only once
	// the kernel has the request). It is held across one send.
	regMu     sync.Mutex
	listening bool        // guarded by regMu: registered with the kernel
	linger    *time.Timer // guarded by regMu: deregisters when idle
	regClosed bool        // guarded by regMu: Close has begun
	// drainMu is held by whoever reads the socket (the reader, or a Peak
	// that reads for itself): records must be folded in the order the
	// kernel queued them, a child's before its parent's. It is held across
	// non-blocking reads only. Lock order: regMu or drainMu (never both),
	// then mu.
	drainMu sync.Mutex
	buf     []byte // guarded by drainMu
	shut    bool   // guarded by drainMu: the descriptors are closed

	mu     sync.Mutex
	closed bool
	active int    // children between Mark and Done
	epoch  uint64 // bumped when records were lost (ENOBUFS) or dropped
	seq    uint64 // records folded so far
	below  map[uint32]span
	ends   map[uint32]span
}

// span is a peak (KiB) and the sequence numbers of the first and the last
// record folded into it.
type span struct {
	peak        uint64
	first, last uint64
}

// Open registers a Listener for the exits of every possible CPU. It fails
// without CAP_NET_ADMIN, outside the initial user and PID namespaces, or
// on a kernel without TASKSTATS (errors.Is(err, os.ErrPermission) for the
// first).
func Open() (*Listener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, xerrors.Errorf("netlink socket: %w", err)
	}
	l := &Listener{self: uint32(os.Getpid()), below: make(map[uint32]span), ends: make(map[uint32]span), done: make(chan struct{}), closing: make(chan struct{})}
	if err := l.register(fd); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(fd)
		return nil, xerrors.Errorf("eventfd: %w", err)
	}
	// Not through the runtime's poller: it keeps a descriptor armed
	// (edge-triggered), so every record would wake a thread of this
	// process, about 35 µs of CPU each, even while the reader pauses.
	// The reader polls the socket itself, and only when it wants more.
	l.fd, l.stop = fd, stop
	go l.read()
	return l, nil
}

// register binds fd, finds the family and asks for every CPU's exits,
// with blocking calls: the kernel answers each request at once. Exit
// records that come before the answer are folded.
func (l *Listener) register(fd int) error {
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return xerrors.Errorf("netlink bind: %w", err)
	}
	// A larger buffer where the kernel allows it (SO_RCVBUFFORCE needs
	// CAP_NET_ADMIN, which registering needs too); the default otherwise.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
	}
	reply, err := request(fd, unix.GENL_ID_CTRL, 0, unix.CTRL_CMD_GETFAMILY, 1, unix.CTRL_ATTR_FAMILY_NAME, unix.TASKSTATS_GENL_NAME, l)
	if err != nil {
		return xerrors.Errorf("find the %s family: %w", unix.TASKSTATS_GENL_NAME, err)
	}
	for typ, data := range attrs(reply) {
		if typ == unix.CTRL_ATTR_FAMILY_ID && len(data) >= 2 {
			l.family = binary.NativeEndian.Uint16(data)
		}
	}
	if l.family == 0 {
		return xerrors.Errorf("find the %s family: no ID in the answer", unix.TASKSTATS_GENL_NAME)
	}
	possible, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return xerrors.Errorf("list the CPUs: %w", err)
	}
	l.cpus = strings.TrimSpace(string(possible))
	if _, err := request(fd, l.family, unix.NLM_F_ACK, unix.TASKSTATS_CMD_GET, unix.TASKSTATS_GENL_VERSION,
		unix.TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, l.cpus, l); err != nil {
		return xerrors.Errorf("register for exits: %w", err)
	}
	l.listening = true
	return nil
}

// request sends one generic netlink request with one string attribute
// and returns the attributes of its answer (nil for an acknowledgement).
// Exit records read meanwhile go to l.
func request(fd int, typ, flags uint16, cmd, version uint8, attr uint16, value string, l *Listener) ([]byte, error) {
	ne := binary.NativeEndian
	if err := unix.Sendto(fd, message(typ, flags, cmd, version, attr, value), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for h, body := range messages(buf[:n]) {
			switch {
			case h.Type == unix.NLMSG_ERROR && h.Seq == 1:
				if len(body) < 4 {
					return nil, errors.New("short netlink error")
				}
				if errno := int32(ne.Uint32(body)); errno != 0 {
					return nil, unix.Errno(-errno)
				}
				return nil, nil
			case h.Type == typ && h.Seq == 1 && len(body) >= 4:
				return body[4:], nil
			case l.family != 0 && h.Type == l.family:
				l.record(body)
			}
		}
	}
}

// message builds one generic netlink request (sequence number 1) with one
// string attribute.
func message(typ, flags uint16, cmd, version uint8, attr uint16, value string) []byte {
	val := append([]byte(value), 0)
	alen := unix.SizeofNlAttr + len(val)
	msg := make([]byte, unix.SizeofNlMsghdr+4+align4(alen))
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], typ)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|flags)
	ne.PutUint32(msg[8:], 1) // seq
	msg[16], msg[17] = cmd, version
	ne.PutUint16(msg[20:], uint16(alen))
	ne.PutUint16(msg[22:], attr)
	copy(msg[24:], val)
	return msg
}

// read folds every record until Close: it polls for one (a blocking
// system call), reads all that are queued, then pauses for batchDelay or
// until Close (a Peak reads what it needs itself).
func (l *Listener) read() {
	defer close(l.done)
	defer func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
	}()
	pause := time.NewTimer(batchDelay)
	pause.Stop()
	fds := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}, {Fd: int32(l.stop), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if !l.drain() {
			return
		}
		pause.Reset(batchDelay)
		select {
		case <-pause.C:
		case <-l.closing:
			pause.Stop()
			return
		}
	}
}

// drain folds every record queued, and reports false when the socket
// failed.
func (l *Listener) drain() bool {
	return l.drainAtMost(drainBudget)
}

// drainBudget bounds the bytes one drain reads: everything queued when it
// began fits in the socket's buffer (the kernel's is twice rcvBuf, and it
// counts each record's overhead too), so a drain reads all of that and
// returns, even while a machine with many CPUs queues exits as fast as it
// reads them (a Peak on the Wait path must not wait for a quiet moment).
// What it leaves is newer than every record queued before it began.
const drainBudget = 2 * rcvBuf

// drainAtMost is drain reading at most budget bytes.
func (l *Listener) drainAtMost(budget int) bool {
	l.drainMu.Lock()
	defer l.drainMu.Unlock()
	if l.shut {
		return false
	}
	if l.buf == nil {
		l.buf = make([]byte, 1<<16)
	}
	buf := l.buf
	for budget > 0 {
		n, _, err := unix.Recvfrom(l.fd, buf, unix.MSG_DONTWAIT)
		if n > 0 {
			budget -= n
		}
		switch {
		case errors.Is(err, unix.EAGAIN):
			return true
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.ENOBUFS):
			// Records were lost: whatever was in flight is unknown.
			l.mu.Lock()
			l.restartLocked()
			l.mu.Unlock()
		case err != nil:
			return false
		default:
			for h, body := range messages(buf[:n]) {
				if h.Type == l.family {
					l.record(body)
				}
			}
		}
	}
	return true
}

// restartLocked forgets everything after a loss and ends the epoch.
func (l *Listener) restartLocked() {
	l.epoch++
	clear(l.below)
	clear(l.ends)
}

// record folds one exit message (a genetlink header, then attributes).
func (l *Listener) record(body []byte) {
	if len(body) < 4 {
		return
	}
	for typ, data := range attrs(body[4:]) {
		if typ != unix.TASKSTATS_TYPE_AGGR_PID {
			continue // the thread group's sum repeats what its tasks' records said
		}
		for typ, stats := range attrs(data) {
			if typ == unix.TASKSTATS_TYPE_STATS {
				l.fold(decode(stats))
			}
		}
	}
}

// exit is what a record says of one exited task.
type exit struct {
	tgid, ppid uint32
	hiwater    uint64 // KiB
}

// decode reads a struct taskstats, which only grows between versions: a
// shorter one from an older kernel is read as far as it goes (without
// ac_tgid, a thread is taken for a process of its own).
func decode(b []byte) exit {
	var ts unix.Taskstats
	n := copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts)), b)
	e := exit{tgid: ts.Ac_pid, ppid: ts.Ac_ppid, hiwater: ts.Hiwater_rss}
	if uintptr(n) >= unsafe.Offsetof(ts.Ac_tgid)+unsafe.Sizeof(ts.Ac_tgid) && ts.Ac_tgid != 0 {
		e.tgid = ts.Ac_tgid
	}
	return e
}

// fold adds one exit: its peak is its own mark and those its reaped
// descendants left in below, and it goes to its parent's entry, or to ends
// when the parent is this process. A thread's record is folded the same
// way: every thread of a group carries the group's memory, and the last
// one folds whatever the group's children left after the first.
func (l *Listener) fold(e exit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	s := span{peak: e.hiwater, first: l.seq, last: l.seq}
	if b, ok := l.below[e.tgid]; ok {
		s = s.merge(b)
		delete(l.below, e.tgid)
	}
	switch {
	case e.ppid == l.self:
		if old, ok := l.ends[e.tgid]; ok {
			s = s.merge(old)
		}
		l.ends[e.tgid] = s
		if len(l.ends) > maxEnds {
			l.forgetOlderEndsLocked()
		}
	case e.ppid != 0:
		if old, ok := l.below[e.ppid]; ok {
			s = s.merge(old)
		}
		l.below[e.ppid] = s
		if len(l.below) > maxBelow {
			l.restartLocked()
		}
	}
}

func (s span) merge(o span) span {
	return span{peak: max(s.peak, o.peak), first: min(s.first, o.first), last: max(s.last, o.last)}
}

// forgetOlderEndsLocked drops the ends older than the middle of those
// kept: children of this process nobody asked for.
func (l *Listener) forgetOlderEndsLocked() {
	lo, hi := l.seq, uint64(0)
	for _, s := range l.ends {
		lo, hi = min(lo, s.last), max(hi, s.last)
	}
	cut := lo + (hi-lo)/2
	for pid, s := range l.ends {
		if s.last <= cut {
			delete(l.ends, pid)
		}
	}
}

// Mark returns the point in the stream a child about to start begins at,
// registering again first if the Listener had stopped listening while
// idle. Call Done once the child's peak is no longer needed.
func (l *Listener) Mark() Mark {
	l.regMu.Lock()
	if l.linger != nil {
		l.linger.Stop()
	}
	if !l.listening && !l.regClosed {
		// The exits missed meanwhile leave what is kept stale: start
		// over (no child is between Mark and Done to lose its peak).
		l.mu.Lock()
		l.restartLocked()
		l.mu.Unlock()
		// Sent without an acknowledgement, which the reader would take;
		// the kernel handles the request before the send returns.
		if send(l.fd, l.family, unix.TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, l.cpus) == nil {
			l.listening = true
		}
	}
	l.mu.Lock()
	l.active++
	m := Mark{epoch: l.epoch, seq: l.seq}
	if !l.listening {
		m.epoch-- // never an epoch: Peak reports unknown
	}
	l.mu.Unlock()
	l.regMu.Unlock()
	return m
}

// Done is called once for each Mark, after the child's Peak (or when it
// will not be asked): once no child is between the two for lingerDelay,
// the Listener deregisters until the next Mark.
func (l *Listener) Done() {
	l.mu.Lock()
	l.active--
	idle := l.active == 0
	l.mu.Unlock()
	if !idle {
		return
	}
	l.regMu.Lock()
	defer l.regMu.Unlock()
	if l.regClosed {
		return
	}
	if l.linger == nil {
		l.linger = time.AfterFunc(lingerDelay, l.stopListening)
	} else {
		l.linger.Reset(lingerDelay)
	}
}

// stopListening deregisters if no child started since the linger began.
func (l *Listener) stopListening() {
	l.regMu.Lock()
	defer l.regMu.Unlock()
	l.mu.Lock()
	idle := l.active == 0
	l.mu.Unlock()
	if !idle || !l.listening || l.regClosed {
		return
	}
	if send(l.fd, l.family, unix.TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK, l.cpus) == nil {
		l.listening = false
	}
}

// send sends one TASKSTATS_CMD_GET request with a CPU list, without
// asking for an acknowledgement.
func send(fd int, family uint16, attr uint16, cpus string) error {
	return unix.Sendto(fd, message(family, 0, unix.TASKSTATS_CMD_GET, unix.TASKSTATS_GENL_VERSION, attr, cpus), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// Watch is called once a child started at m has its PID: it drops what
// records read before m left under that PID, from a process that had the
// number before it.
func (l *Listener) Watch(pid int, m Mark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, kept := range []map[uint32]span{l.below, l.ends} {
		if s, ok := kept[uint32(pid)]; ok && s.last <= m.seq {
			delete(kept, uint32(pid))
		}
	}
}

// Peak returns the largest memory high-water mark, in bytes, of the child
// pid started at m and of every descendant it reaped. Call it once the
// child has been reaped (or waited for): every record of its tree was
// queued before that, so Peak reads what is queued and looks, without
// waiting for anything. It reports false when records were lost since m,
// when what is kept under pid mixes records from before m, or when the
// kernel sent no record or no mark (0).
func (l *Listener) Peak(pid int, m Mark) (int64, bool) {
	// drainMu orders this read after any the reader has under way, so
	// that every record queued before now is folded when it returns.
	l.drain()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.epoch != m.epoch {
		return 0, false
	}
	s, ok := l.ends[uint32(pid)]
	if !ok || s.last <= m.seq {
		return 0, false
	}
	delete(l.ends, uint32(pid))
	if s.first <= m.seq || s.peak == 0 {
		return 0, false
	}
	return int64(s.peak) * 1024, true
}

// Close deregisters the Listener (the kernel drops a listener whose socket
// is gone) and waits for its reader to return.
func (l *Listener) Close() error {
	l.regMu.Lock()
	l.regClosed = true
	if l.linger != nil {
		l.linger.Stop()
	}
	l.regMu.Unlock()
	close(l.closing)
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, err := unix.Write(l.stop, one[:])
	<-l.done
	// Only now: the reader uses both until it returns, and a late Peak
	// must not read a descriptor the number was given to since.
	l.drainMu.Lock()
	defer l.drainMu.Unlock()
	l.shut = true
	return errors.Join(err, unix.Close(l.fd), unix.Close(l.stop))
}

// messages yields each netlink message's header and body in b.
func messages(b []byte) func(func(unix.NlMsghdr, []byte) bool) {
	return func(yield func(unix.NlMsghdr, []byte) bool) {
		ne := binary.NativeEndian
		for len(b) >= unix.SizeofNlMsghdr {
			h := unix.NlMsghdr{Len: ne.Uint32(b), Type: ne.Uint16(b[4:]), Flags: ne.Uint16(b[6:]), Seq: ne.Uint32(b[8:]), Pid: ne.Uint32(b[12:])}
			if h.Len < unix.SizeofNlMsghdr || int(h.Len) > len(b) {
				return
			}
			if !yield(h, b[unix.SizeofNlMsghdr:h.Len]) {
				return
			}
			b = b[min(len(b), align4(int(h.Len))):]
		}
	}
}

// attrs yields each netlink attribute's type (without its flags) and data.
func attrs(b []byte) func(func(uint16, []byte) bool) {
	return func(yield func(uint16, []byte) bool) {
		ne := binary.NativeEndian
		for len(b) >= unix.SizeofNlAttr {
			n, typ := int(ne.Uint16(b)), ne.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER)
			if n < unix.SizeofNlAttr || n > len(b) {
				return
			}
			if !yield(typ, b[unix.SizeofNlAttr:n]) {
				return
			}
			b = b[min(len(b), align4(n)):]
		}
	}
}

func align4(n int) int { return (n + 3) &^ 3 }
