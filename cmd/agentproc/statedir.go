package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentproc/agentproc"
)

// The --state-dir of mcp and serve is shared: each session records its
// processes in a directory of its own under it (a live Manager locks its
// dir, so a second editor window or a sub-agent given the same --state-dir
// would otherwise get no tools), and each new session stops what dead ones
// left running and removes their directories.

// sessionPrefix starts the name of a session's directory.
const sessionPrefix = "session-"

// newSession picks this session's directory under --state-dir; the Manager
// creates it (mode 0700) and locks it.
func (m *managerFlags) newSession() error {
	if m.stateDir == "" {
		return nil
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("naming the session's state dir: %w", err)
	}
	m.session = filepath.Join(m.stateDir, sessionPrefix+hex.EncodeToString(b))
	return nil
}

// recovered waits, with a state dir, until m has stopped what a session
// that died with this directory left running (none: the name is new), then
// does the same for every other session directory under --state-dir that
// no live session holds, and removes those; so a session starts clean,
// and an unusable dir is reported before anything runs.
func recovered(ctx context.Context, m *agentproc.Manager, mf *managerFlags, stderr io.Writer) error {
	if mf.session == "" {
		return nil
	}
	if _, err := m.Recovered(ctx); err != nil {
		return fmt.Errorf("state dir %s: %w", mf.session, err)
	}
	entries, err := os.ReadDir(mf.stateDir)
	if err != nil {
		return fmt.Errorf("state dir %s: %w", mf.stateDir, err)
	}
	dirs := []string{}
	if _, err := os.Lstat(filepath.Join(mf.stateDir, "lock")); err == nil {
		// The whole dir, as an agentproc before sessions used it.
		dirs = append(dirs, mf.stateDir)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), sessionPrefix) {
			if p := filepath.Join(mf.stateDir, e.Name()); p != mf.session {
				dirs = append(dirs, p)
			}
		}
	}
	for _, dir := range dirs {
		// A Manager on the dir recovers it like a restart would: its
		// lock tells a live session's dir (left alone) from a dead one's.
		dm := agentproc.New(agentproc.WithStateDir(dir))
		_, err := dm.Recovered(ctx)
		dm.Close()
		switch {
		case err == nil && dir != mf.stateDir:
			_ = os.RemoveAll(dir)
		case err != nil && !errors.Is(err, syscall.EWOULDBLOCK):
			fmt.Fprintf(stderr, "agentproc: warning: state dir %s of an earlier session: %v (left as it is)\n", dir, err)
		}
	}
	return nil
}

// endSession removes this session's directory once its Manager has shut
// down: Shutdown removed the records, only the lock file is left.
func (m *managerFlags) endSession() {
	if m.session != "" {
		_ = os.RemoveAll(m.session)
	}
}
