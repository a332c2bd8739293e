package agentproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"cdr.dev/slog/v3"
)

// maxLogBacklog bounds the output waiting to be written to one process's
// log. When the disk falls this far behind, further output is dropped from
// the log (and the gap marked in it) rather than making the child wait.
const maxLogBacklog = 4 << 20

// logChunks recycles the copies of pipe reads queued for the log writer.
var logChunks = sync.Pool{New: func() any {
	b := make([]byte, 0, 64<<10)
	return &b
}}

// outputLog copies one process's output to a file, for callers who need
// more than the head and tail the buffer keeps. A nil *outputLog logs
// nothing, so callers need no checks.
//
// The output reader hands each pipe read to enqueue, which only copies it
// into a bounded queue, so the child waits for the log no longer than for
// the buffer; a goroutine of the log's own writes the queue to the file.
// The file state (f, size, total, capped) belongs to that goroutine; the
// queue is guarded by mu. remove is called only with m.mu held after the
// process has exited, so after the writer has finished.
type outputLog struct {
	logger   slog.Logger
	path     string
	f        *os.File // nil once closed or failed
	maxBytes int64    // <= 0: no cap
	size     int64    // bytes in the file
	total    int64    // bytes the process wrote, as far as the writer got
	capped   bool     // total passed maxBytes; the file keeps maxBytes/2
	removed  bool

	mu      sync.Mutex
	queue   []logItem
	backlog int           // bytes in queue
	closing bool          // the output has ended; the writer drains and exits
	wake    chan struct{} // 1-buffered: there is work for the writer
	done    chan struct{} // closed when the writer has closed the file
}

// logItem is a pipe read queued for the log, or a run of dropped bytes.
type logItem struct {
	data    *[]byte
	dropped int64
}

// openOutputLog creates the log file of process id, or returns nil when
// logging is off or the file cannot be made; that failure is logged and the
// process runs without a log.
func (m *Manager) openOutputLog(id string) *outputLog {
	dir := m.cfg.logDir
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, id+".log")
	l := &outputLog{logger: m.cfg.logger, path: path, maxBytes: m.cfg.logMaxBytes}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		l.warn("create output log dir", err)
		return nil
	}
	// O_EXCL: the ID is new, so an existing file is someone else's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		l.warn("create output log", err)
		return nil
	}
	l.f = f
	l.wake = make(chan struct{}, 1)
	l.done = make(chan struct{})
	go l.run()
	return l
}

// enqueue queues p for the log without blocking. It runs on the output
// reader after the buffer write.
func (l *outputLog) enqueue(p []byte) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.backlog+len(p) > maxLogBacklog {
		if n := len(l.queue); n > 0 && l.queue[n-1].data == nil {
			l.queue[n-1].dropped += int64(len(p))
		} else {
			l.queue = append(l.queue, logItem{dropped: int64(len(p))})
		}
	} else {
		buf := logChunks.Get().(*[]byte)
		*buf = append((*buf)[:0], p...)
		l.queue = append(l.queue, logItem{data: buf})
		l.backlog += len(p)
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// logFinishBound bounds how long the exit waits for the log writer. The
// queue holds at most maxLogBacklog, which a working disk takes in
// milliseconds; a hung one (a dead network mount) must not keep the exit
// from being published, nor Close from returning. Real time, like the pipe
// drain: it guards against the OS, not against the caller.
const logFinishBound = 5 * time.Second

// finish tells the writer the output has ended and waits until it has
// written the queue and closed the file: the exit is published only after,
// so a log that Info shows for an exited process is complete, unless the
// disk did not take the rest within logFinishBound. The writer is then left
// to finish (or stay stuck) on its own.
func (l *outputLog) finish() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(logFinishBound)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
}

// run is the writer goroutine.
func (l *outputLog) run() {
	defer close(l.done)
	var batch []logItem
	for range l.wake {
		l.mu.Lock()
		batch, l.queue = l.queue, batch[:0]
		closing := l.closing
		l.mu.Unlock()
		for i, it := range batch {
			if it.data != nil {
				n := len(*it.data)
				l.write(*it.data)
				logChunks.Put(it.data)
				l.mu.Lock()
				l.backlog -= n
				l.mu.Unlock()
			} else {
				l.skip(it.dropped)
			}
			batch[i] = logItem{}
		}
		if closing {
			l.close()
			return
		}
	}
}

// skip records bytes that were dropped because the disk fell behind.
func (l *outputLog) skip(n int64) {
	if l.f == nil {
		return
	}
	l.total += n
	if l.capped || (l.maxBytes > 0 && l.total > l.maxBytes) {
		l.capLog(nil)
		return
	}
	marker := "\n[agentproc: " + strconv.FormatInt(n, 10) + " bytes not logged: the disk fell behind]\n"
	if _, err := l.f.WriteString(marker); err != nil {
		l.fail("write output log", err)
		return
	}
	l.size += int64(len(marker))
}

// pathOrEmpty is the path reported in Info.LogPath.
func (l *outputLog) pathOrEmpty() string {
	if l == nil {
		return ""
	}
	return l.path
}

// write appends p to the file, or only counts it once the cap is reached
// or logging failed.
func (l *outputLog) write(p []byte) {
	if l.f == nil {
		return
	}
	l.total += int64(len(p))
	if l.maxBytes > 0 && l.total > l.maxBytes {
		l.capLog(p)
		return
	}
	if _, err := l.f.Write(p); err != nil {
		l.fail("write output log", err)
		return
	}
	l.size += int64(len(p))
}

// capLog runs once, at the write that takes the output past maxBytes (p is
// that write): the file is cut back to, or filled up to, its first
// maxBytes/2 bytes, and from then on bytes are only counted.
func (l *outputLog) capLog(p []byte) {
	if l.capped {
		return
	}
	l.capped = true
	keep := l.maxBytes / 2
	if l.size > keep {
		if err := l.f.Truncate(keep); err != nil {
			l.fail("truncate output log", err)
			return
		}
		if _, err := l.f.Seek(keep, 0); err != nil {
			l.fail("truncate output log", err)
			return
		}
		l.size = keep
		return
	}
	n := min(keep-l.size, int64(len(p)))
	if _, err := l.f.Write(p[:n]); err != nil {
		l.fail("write output log", err)
		return
	}
	l.size += n
}

// close ends the log when the output has ended. A capped log gets a last
// line saying how many bytes it does not hold.
func (l *outputLog) close() {
	if l.f == nil {
		return
	}
	if l.capped {
		marker := "\n[agentproc: " + strconv.FormatInt(l.total-l.size, 10) +
			" more bytes not logged; the log keeps the first " + strconv.FormatInt(l.size, 10) + "]\n"
		if _, err := l.f.WriteString(marker); err != nil {
			l.fail("write output log", err)
			return
		}
	}
	if err := l.f.Close(); err != nil {
		l.warn("close output log", err)
	}
	l.f = nil
}

// remove deletes the file. The caller holds m.mu and the process has exited.
func (l *outputLog) remove() {
	if l == nil || l.removed {
		return
	}
	l.removed = true
	if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.warn("remove output log", err)
	}
}

// fail turns logging off for this process after a write error (a full disk,
// say). The process keeps running; its file keeps what was written.
func (l *outputLog) fail(step string, err error) {
	l.warn(step+"; output logging off for this process", err)
	_ = l.f.Close()
	l.f = nil
}

func (l *outputLog) warn(step string, err error) {
	l.logger.Warn(context.Background(), step, slog.F("path", l.path), fieldError(err))
}

// removeLogsLocked deletes the logs of every retained process; Close calls
// it once they have all exited.
func (m *Manager) removeLogsLocked() {
	for _, p := range m.procs {
		p.log.remove()
	}
}
