package agentproc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cdr.dev/slog/v3"
	"golang.org/x/xerrors"
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

// logDirBound is the longest anyone waits for a file-system call in the
// output log directory: the open of a log at Start, the writing of what is
// queued when a process exits, and the removal of the logs at Close. A
// working disk answers in milliseconds; a hung one (a dead network mount, a
// frozen file system) must cost a caller at most this once. Real time, like
// the pipe drain: it guards against the OS, not against the caller.
const logDirBound = 5 * time.Second

// logDir is the directory of WithOutputLog, through which every file-system
// call on the logs goes, bounded by its fsBound (see fsbound.go). None runs
// under Manager.mu or a Process lock. While the directory is hung, Start
// fails at once rather than waiting out the bound again, and exits and
// Close do not wait for it at all.
//
// Removals are queued on the fsBound's single goroutine, so a hung
// directory holds at most one goroutine for removals, however many
// processes retention drops meanwhile.
type logDir struct {
	fsBound
	path     string
	maxBytes int64 // the cap of each log; <= 0: none
	logger   slog.Logger

	mu sync.Mutex // guards outputLog.removed; no call is made under it
}

// newLogDir returns the log directory of cfg. Without WithOutputLog its
// path is "" and it opens no log; it still removes the logs of processes a
// state directory recovered from an earlier Manager. A relative dir is
// made absolute here, once, against the working directory at New: the one
// form of a log's path, for the processes this Manager runs and for those
// it recovers (TestOutputLogPathAbsolute).
func newLogDir(cfg *config) *logDir {
	return &logDir{fsBound: fsBound{bound: cfg.logDirBound}, path: absLogDir(cfg.logDir), maxBytes: cfg.logMaxBytes, logger: cfg.logger}
}

// absLogDir is dir made absolute, or dir as given if it is "" or the
// working directory cannot be read.
func absLogDir(dir string) string {
	if dir == "" {
		return ""
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// open creates the log of process id before the process starts. A log that
// cannot be created, or not within the bound, is an error naming its path:
// the caller asked for the whole output, so the process must not run
// without it.
func (d *logDir) open(id string) (*outputLog, error) {
	if d == nil || d.path == "" {
		return nil, nil
	}
	path := logPath(d.path, id)
	if d.hung() {
		return nil, xerrors.Errorf("agentproc: open output log %q: an earlier call in %q has not returned within %v: %w",
			path, d.path, d.bound, os.ErrDeadlineExceeded)
	}
	var f *os.File
	var err error
	ok := d.call(func() {
		if err = os.MkdirAll(d.path, 0o700); err != nil {
			return
		}
		// O_EXCL: the ID is new, so an existing file is someone else's.
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}, func() {
		if f != nil {
			_ = f.Close()
			_ = os.Remove(path)
		}
	})
	if !ok {
		return nil, xerrors.Errorf("agentproc: open output log %q: no answer within %v: %w", path, d.bound, os.ErrDeadlineExceeded)
	}
	if err != nil {
		return nil, xerrors.Errorf("agentproc: open output log %q: %w", path, err)
	}
	return &outputLog{dir: d, path: path, f: f}, nil
}

// logPath is the one place that names the log of process id in dir; the
// state dir records the same path (Manager.outputLogPath).
func logPath(dir, id string) string { return filepath.Join(dir, id+".log") }

// remove queues the deletion of l's file. It makes no call itself, so it is
// safe under any lock; the file goes soon after, unless the directory hangs.
func (d *logDir) remove(l *outputLog) {
	if d == nil || l == nil {
		return
	}
	d.queueRemoval(l, nil, l.path)
}

// discard closes and deletes the file of a log whose process never started.
func (d *logDir) discard(l *outputLog) {
	if d == nil || l == nil {
		return
	}
	d.queueRemoval(l, l.f, l.path)
}

func (d *logDir) queueRemoval(l *outputLog, f *os.File, path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l.removed {
		return
	}
	l.removed = true
	d.enqueue(func() {
		if f != nil {
			_ = f.Close()
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.warn("remove output log", path, err)
		}
	})
}

// waitRemoved waits until the queued removals are done, at most the bound,
// and not at all while the directory hangs. Close calls it last.
func (d *logDir) waitRemoved() {
	if d == nil {
		return
	}
	d.waitIdle()
}

func (d *logDir) warn(step, path string, err error) {
	d.logger.Warn(context.Background(), step, slog.F("path", path), fieldError(err))
}

// outputLog copies one process's output to a file, for callers who need
// more than the head and tail the buffer keeps. A nil *outputLog logs
// nothing, so callers need no checks.
//
// The output reader hands each pipe read to enqueue, which only copies it
// into a bounded queue, so the child waits for the log no longer than for
// the buffer; a goroutine of the log's own, started once the process runs,
// writes the queue to the file. The file state (f, size, total, capped)
// belongs to that goroutine; the queue is guarded by mu.
type outputLog struct {
	dir     *logDir
	path    string
	f       *os.File     // nil once closed or failed
	size    int64        // bytes in the file
	total   int64        // bytes the process wrote, as far as the writer got
	capped  bool         // total passed the cap; the file keeps half of it
	removed bool         // queued for removal; guarded by dir.mu
	writer  atomic.Int32 // the writer as a bounded call (callRunning, ...)

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

// start starts the writer goroutine, once the process runs.
func (l *outputLog) start() {
	if l == nil {
		return
	}
	l.wake = make(chan struct{}, 1)
	l.done = make(chan struct{})
	go l.run()
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

// finish tells the writer the output has ended and waits until it has
// written the queue and closed the file: the exit is published only after,
// so a log that Info shows for an exited process is complete, unless the
// disk did not take the rest within the bound, or the directory was already
// hung, in which case finish does not wait. The writer is then left to
// finish (or stay stuck) on its own.
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
	if l.dir.hung() {
		return
	}
	l.dir.await(&l.writer, l.done)
}

// run is the writer goroutine.
func (l *outputLog) run() {
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
			break
		}
	}
	if !l.writer.CompareAndSwap(callRunning, callReturned) {
		l.dir.overdue.Add(-1) // finish gave up on this writer
		return
	}
	close(l.done)
}

// skip records bytes that were dropped because the disk fell behind.
func (l *outputLog) skip(n int64) {
	if l.f == nil {
		return
	}
	l.total += n
	if l.capped || (l.dir.maxBytes > 0 && l.total > l.dir.maxBytes) {
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
	if l.dir.maxBytes > 0 && l.total > l.dir.maxBytes {
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
	keep := l.dir.maxBytes / 2
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

// fail turns logging off for this process after a write error (a full disk,
// say). The process keeps running; its file keeps what was written.
func (l *outputLog) fail(step string, err error) {
	l.warn(step+"; output logging off for this process", err)
	_ = l.f.Close()
	l.f = nil
}

func (l *outputLog) warn(step string, err error) {
	l.dir.warn(step, l.path, err)
}
