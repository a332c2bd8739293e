package agentproc

import (
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/confine"
)

// A detached process's sandbox. The host builds the policy as for an
// attached Start (Landlock ruleset, seccomp filter, namespaces) and hands
// the runner what it built: the ruleset and namespace descriptors as
// inherited files, the filter and the rest in detachSandboxEnv. The runner
// itself stays unconfined (it writes the state dir the policy hides) and
// confines only the shell's start, on a throwaway thread of its own, with
// sandboxBuilt.start: the same steps in the same order as an attached
// Start. The descriptors keep the namespaces alive after the host exits.
//
// The private temp dir of a detached process is a directory of its own
// (not under the Manager's temp parent, which Close removes while the
// process may run on), granted by a policy built for this Start alone; the
// runner removes it once the tree is gone.

const (
	// detachSandboxEnv is "ruleset,netns,mntns,dropcaps,filter,tmpdir":
	// descriptor numbers in the runner (-1: none), 1 or 0, the seccomp
	// filter in base64 ("" without), the temp dir to remove ("" without).
	detachSandboxEnv = "AGENTPROC_DETACH_SANDBOX"
	// detachSandboxFD is the first descriptor the runner gets the built
	// policy's descriptors at (after detachDirFD).
	detachSandboxFD = detachDirFD + 1
)

// prepareDetachedSandbox builds sb's policy for a detached Start in dir
// (dirChosen: named by the request, see sandboxPolicyFor),
// with a temp dir of its own; nil sb gives nil. Nothing is left behind
// when it fails.
func (m *Manager) prepareDetachedSandbox(sb *Sandbox, dir string, dirChosen, tty bool) (*sandboxRun, error) {
	if sb == nil {
		return nil, nil
	}
	// The Manager's temp parent exists before the policy is built, which
	// hides it (the other trees' temp dirs) from this tree.
	if _, err := m.sandbox.tempParent(); err != nil {
		return nil, xerrors.Errorf("agentproc: sandbox temp dir: %w", err)
	}
	var tmp string
	if !sb.NoDefaultWrite {
		d, err := os.MkdirTemp("", "agentproc-sandbox-detached-")
		if err != nil {
			return nil, xerrors.Errorf("agentproc: sandbox temp dir: %w", err)
		}
		tmp = d
	}
	fail := func(err error) (*sandboxRun, error) {
		if tmp != "" {
			_ = removeTree(tmp)
		}
		return nil, err
	}
	pol, err := m.sandboxPolicyFor(sb, dir, tmp, dirChosen, tty)
	if err != nil {
		return fail(err)
	}
	built, err := m.sandbox.cache.buildAlone(pol)
	if err != nil {
		return fail(xerrors.Errorf(prefixFor(err)+"build sandbox: %w", err))
	}
	warnings, err := checkUnenforced(pol, built.missing)
	if err != nil {
		built.done()
		return fail(err)
	}
	info := built.info
	info.Mechanisms = append([]string(nil), built.info.Mechanisms...)
	info.TempDir = tmp
	return &sandboxRun{built: built, env: sb.Env, tmpDir: tmp, info: &info, warnings: warnings}, nil
}

// buildAlone builds pol for one Start, outside the cache: done releases it.
func (c *sandboxCache) buildAlone(pol *sandboxPolicy) (*sandboxBuilt, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	b := &sandboxBuilt{ruleset: -1, netns: -1, mntns: -1, view: confine.MountView{NS: -1, Events: -1, Live: -1}, uncached: true}
	if err := c.build(b, pol); err != nil {
		b.release()
		return nil, err
	}
	return b, nil
}

// runnerFiles returns the descriptors the runner inherits (duplicates, for
// the caller to close once the runner has started) and the value of
// detachSandboxEnv.
func (r *sandboxRun) runnerFiles() ([]*os.File, string, error) {
	var files []*os.File
	num := func(fd int, name string) (string, error) {
		if fd < 0 {
			return "-1", nil
		}
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return "", xerrors.Errorf("duplicate the sandbox's %s: %w", name, err)
		}
		files = append(files, os.NewFile(uintptr(d), name))
		return strconv.Itoa(detachSandboxFD + len(files) - 1), nil
	}
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	b := r.built
	fields := make([]string, 0, 6)
	for _, d := range []struct {
		fd   int
		name string
	}{{b.ruleset, "ruleset"}, {b.netns, "netns"}, {b.mntns, "mntns"}} {
		s, err := num(d.fd, d.name)
		if err != nil {
			closeAll()
			return nil, "", err
		}
		fields = append(fields, s)
	}
	caps := "0"
	if b.dropCaps {
		caps = "1"
	}
	var filter string
	if len(b.filter) > 0 {
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&b.filter[0])), len(b.filter)*int(unsafe.Sizeof(b.filter[0])))
		filter = base64.StdEncoding.EncodeToString(raw)
	}
	fields = append(fields, caps, filter, r.tmpDir)
	return files, strings.Join(fields, ","), nil
}

// runnerSandbox is the runner's side: the policy the host built, from
// detachSandboxEnv's value v, and the temp dir to remove at the end. The
// descriptors are marked close-on-exec so the shell does not get them.
func runnerSandbox(v string) (*sandboxBuilt, string, error) {
	f := strings.Split(v, ",")
	if len(f) < 6 {
		return nil, "", xerrors.New("bad sandbox description")
	}
	tmp := strings.Join(f[5:], ",") // a temp dir's name may hold a comma
	b := &sandboxBuilt{dropCaps: f[3] == "1", view: confine.MountView{NS: -1, Events: -1, Live: -1}, uncached: true}
	for i, p := range []*int{&b.ruleset, &b.netns, &b.mntns} {
		n, err := strconv.Atoi(f[i])
		if err != nil || n < -1 {
			return nil, "", xerrors.Errorf("bad sandbox descriptor %q", f[i])
		}
		if n >= 0 {
			unix.CloseOnExec(n)
		}
		*p = n
	}
	if f[4] != "" {
		raw, err := base64.StdEncoding.DecodeString(f[4])
		size := int(unsafe.Sizeof(unix.SockFilter{}))
		if err != nil || len(raw) == 0 || len(raw)%size != 0 {
			return nil, "", xerrors.New("bad seccomp filter")
		}
		b.filter = make([]unix.SockFilter, len(raw)/size)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&b.filter[0])), len(raw)), raw)
	}
	return b, tmp, nil
}
