package agentproc

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/procfs"
)

// This file is the runner's side of a detached process: the code that runs
// in the re-executed copy of the host binary (runDetached, reexec_linux.go)
// and never in the host. The host's side, which starts the runner and
// follows what it writes, is detach_linux.go, where the protocol between
// the two (environment, descriptors, files) is described.

// maxRunnerSecrets bounds what the runner reads from its stdin: the
// secrets it redacts (encodeSecrets).
const maxRunnerSecrets = 256 << 20

// runDetached is the runner's main (see reexecRoles). argv is the shell and
// the command.
func runDetached(argv []string) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	signal.Ignore(syscall.SIGPIPE)
	// The secrets to redact come on stdin, never through argv or the
	// environment, which other users' ps can read; EOF (the null
	// device) means none.
	secrets, err := io.ReadAll(io.LimitReader(os.Stdin, maxRunnerSecrets))
	_ = os.Stdin.Close()
	var redactions atomic.Int64
	var rd redaction
	if err == nil {
		rd.sets[0], err = decodeSecrets(secrets)
		rd.count = &redactions
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentproc runner: read secrets:", err)
		return 2
	}
	dir := detachDirFD
	var st unix.Stat_t
	segBytes, _ := strconv.ParseInt(os.Getenv(detachSegEnv), 10, 64)
	if unix.Fstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || segBytes <= 0 || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "agentproc runner: bad environment")
		return 2
	}
	unix.CloseOnExec(dir) // the shell does not get it
	if v := os.Getenv(detachOOMEnv); v != "" {
		if err := os.WriteFile(procfs.SelfFile("oom_score_adj"), []byte(v), 0); err != nil {
			fmt.Fprintln(os.Stderr, "agentproc runner: raise oom_score_adj:", err)
		}
	}
	// The shell's environment comes in detachEnvPrefix variables, in
	// order; the runner's own are not passed on.
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, detachEnvPrefix):
			env = append(env, v)
		case k == detachIDEnv:
			env = append(env, MarkerEnv+"="+v)
		}
	}
	var sbx *sandboxBuilt
	var sbxTmp string
	if v, ok := os.LookupEnv(detachSandboxEnv); ok {
		var err error
		if sbx, sbxTmp, err = runnerSandbox(v); err != nil {
			fmt.Fprintln(os.Stderr, "agentproc runner:", err)
			return 2
		}
	}
	removeTmp := func() {
		if sbxTmp != "" {
			_ = removeTree(sbxTmp)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentproc runner:", err)
		removeTmp()
		return 1
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if sbx != nil {
		// Joining the mount namespace moves the thread to its root: the
		// shell goes back to the work dir the runner was started in.
		if cmd.Dir, err = os.Getwd(); err == nil {
			err = sbx.start(cmd, sandboxStart{}) // confined on a throwaway thread, as attached (no cgroup: a detached process has no limits)
		}
	} else {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentproc runner: start:", err)
		removeTmp()
		return 1
	}
	_ = w.Close()
	pid := cmd.Process.Pid
	// Read before the shell is reaped below: a zombie keeps its start time.
	id, _, _ := statIdentity(pid)
	// The host reads the leader from stdout; then stdout is let go so the
	// host's pipe reaches EOF.
	fmt.Fprintf(os.Stdout, "%d %d\n", pid, id.Start)
	_ = os.Stdout.Close()

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		writeSegments(r, dir, segBytes, rd)
	}()
	// What is left of the group is killed so the pipe can reach EOF, while
	// the shell is an unreaped zombie: its PID, the group ID, cannot name
	// another process until it is reaped.
	waited := make(chan struct{})
	go reapTracedThreads(pid, copied, waited) // a thread of the shell traced by this runner
	awaitExitUnreaped(pid)
	_ = unix.Kill(-pid, unix.SIGKILL)
	_ = cmd.Wait()
	close(waited)
	if cmd.ProcessState != nil {
		(&sysProc{}).reapTraced(cmd.ProcessState) // a shell stopped under a trace (PTRACE_TRACEME)
	}
	removeTmp() // the tree is gone: nothing confined can use it any more
	select {
	case <-copied:
	case <-time.After(defaultPipeDrain):
		_ = r.SetReadDeadline(time.Now())
		<-copied
	}
	code, sig := (&sysProc{}).exitStatus(cmd.ProcessState) // a group adds nothing to the wait status
	data, _ := json.Marshal(detachStatus{Code: code, Signal: sig, Redactions: redactions.Load()})
	if f, err := openAt(dir, ".status.tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err == nil {
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil && cerr == nil {
			_ = renameAt(dir, ".status.tmp", "status")
		}
	}
	return 0
}

// writeSegments copies r into segment files of segBytes each until EOF,
// removing tail segments older than the last two. Every read passes
// through rd's redaction stage first, so the files, and everything that
// reads them, hold only redacted bytes.
func writeSegments(r io.Reader, dir int, segBytes int64, rd redaction) {
	buf := make([]byte, 64<<10)
	var seg int64
	var off int64
	var f *os.File
	open := func() {
		var err error
		f, err = openAt(dir, segName(seg), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			f = nil
		}
		if old := seg - 2; old >= detachHeadSegs {
			_ = unlinkAt(dir, segName(old))
		}
	}
	open()
	red := rd.newRedactor(func(p []byte) {
		for len(p) > 0 {
			take := min(int64(len(p)), segBytes-off)
			if f != nil {
				_, _ = f.Write(p[:take])
			}
			p = p[take:]
			off += take
			if off == segBytes {
				if f != nil {
					_ = f.Close()
				}
				seg++
				off = 0
				open()
			}
		}
	})
	for {
		n, err := r.Read(buf)
		red.write(buf[:n])
		if err != nil {
			break
		}
	}
	red.flush()
	if f != nil {
		_ = f.Close()
	}
}
