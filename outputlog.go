package agentproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"cdr.dev/slog/v3"
)

// outputLog copies one process's output to a file, for callers who need
// more than the head and tail the buffer keeps. A nil *outputLog logs
// nothing, so callers need no checks.
//
// write and close are called only by the process's output reader, and
// remove only with m.mu held after the process has exited (so after close),
// which orders every access without a mutex of its own.
type outputLog struct {
	logger   slog.Logger
	path     string
	f        *os.File // nil once closed or failed
	maxBytes int64    // <= 0: no cap
	size     int64    // bytes in the file
	total    int64    // bytes the process wrote
	capped   bool     // total passed maxBytes; the file keeps maxBytes/2
	removed  bool
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
	return l
}

// pathOrEmpty is the path reported in Info.LogPath.
func (l *outputLog) pathOrEmpty() string {
	if l == nil {
		return ""
	}
	return l.path
}

// write appends p, which the buffer has just taken. It runs on the output
// reader after the buffer write, so the child waits for it like it waits
// for the buffer: one write to the page cache per pipe read, and nothing at
// all once the cap is reached or logging failed.
func (l *outputLog) write(p []byte) {
	if l == nil || l.f == nil {
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
	if l == nil || l.f == nil {
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
