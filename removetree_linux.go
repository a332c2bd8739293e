package agentproc

import (
	"errors"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// removeTree removes dir and what it holds, as os.RemoveAll does, but with
// a bounded number of descriptors open: os.RemoveAll holds one for every
// level it descends, and a tree that nests its temp dir deeper than the
// host's RLIMIT_NOFILE made the host run out of descriptors (every other
// open, accept and Start failing meanwhile) and give up with the tree's
// files left behind (ninth attack review, TestAttackDeepTempDirOutlivesTree).
// Below removeTreeDepth levels it descends as os.RemoveAll does; deeper, it
// moves a directory's entries up into its parent, under new names, and
// removes it, so that nesting of any depth is undone one level at a time.
// Nothing is opened through a link. It gives up after removeTreeSteps
// steps, against a leftover of the tree that keeps filling the dir.
func removeTree(dir string) error {
	err := os.Remove(dir)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	rm := treeRemover{steps: removeTreeSteps}
	err = rm.empty(fd, 0)
	_ = unix.Close(fd)
	if err != nil {
		return &os.PathError{Op: "remove", Path: dir, Err: err}
	}
	return os.Remove(dir)
}

const (
	// removeTreeDepth is how many levels removeTree descends holding a
	// descriptor for each.
	removeTreeDepth = 32
	// removeTreeSteps bounds removeTree's unlinks, renames and reads.
	removeTreeSteps = 1 << 24
	// removeTreeBatch is how many names one read of a directory returns.
	removeTreeBatch = 1024
)

// errRemoveStuck is removeTree's error when a pass removes nothing, or
// when it ran out of steps.
var errRemoveStuck = errors.New("entries left that cannot be removed")

// treeRemover is one removeTree's state: its step budget and the counter
// of the names it gives entries it moves up.
type treeRemover struct {
	steps int
	moved int
}

// empty removes every entry of the directory fd, at depth below the
// removed dir.
func (r *treeRemover) empty(fd, depth int) error {
	for {
		names, err := r.names(fd)
		if err != nil || len(names) == 0 {
			return err
		}
		progress := false
		for _, name := range names {
			if r.remove(fd, name, depth) {
				progress = true
			}
		}
		if !progress || r.steps <= 0 {
			return errRemoveStuck
		}
	}
}

// remove removes the entry name of the directory parent, or, deep down,
// moves what it holds up into parent; it reports whether it changed
// anything.
func (r *treeRemover) remove(parent int, name string, depth int) bool {
	r.steps -= 2
	if unix.Unlinkat(parent, name, 0) == nil || unix.Unlinkat(parent, name, unix.AT_REMOVEDIR) == nil {
		return true
	}
	sub, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	changed := false
	if depth < removeTreeDepth {
		changed = r.empty(sub, depth+1) == nil
	} else if names, err := r.names(sub); err == nil {
		for _, n := range names {
			if r.moveUp(sub, n, parent) {
				changed = true
			}
		}
	}
	_ = unix.Close(sub)
	return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR) == nil || changed
}

// moveUp renames the entry name of from into to, under a name to does
// not hold (RENAME_NOREPLACE).
func (r *treeRemover) moveUp(from int, name string, to int) bool {
	for range 8 {
		r.steps--
		r.moved++
		err := unix.Renameat2(from, name, to, ".agentproc-rm-"+strconv.Itoa(r.moved), unix.RENAME_NOREPLACE)
		if err == nil {
			return true
		}
		if !errors.Is(err, unix.EEXIST) {
			return false
		}
	}
	return false
}

// names reads up to removeTreeBatch names of the directory fd from its
// start, through a duplicate of fd (which shares its offset: rewound
// first).
func (r *treeRemover) names(fd int) ([]string, error) {
	r.steps--
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	names, err := f.Readdirnames(removeTreeBatch)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
}
