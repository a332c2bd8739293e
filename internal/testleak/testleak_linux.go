package testleak

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentproc/agentproc/internal/pidfd"
	"github.com/agentproc/agentproc/internal/procfs"
)

func mark() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	v := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	_ = os.Setenv(Env, v)
	return v
}

// carries reports whether pid's environment holds Env=value, and returns
// its helper mode.
func carries(pid int, value string) (ok bool, helper string) {
	env, err := os.ReadFile(procfs.PIDFile(pid, "environ"))
	if err != nil {
		return false, ""
	}
	want := []byte(Env + "=" + value)
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, want) {
			ok = true
		}
		if k, v, found := strings.Cut(string(kv), "="); found && k == "AGENTPROC_TEST_HELPER" {
			helper = v
		}
	}
	return ok, helper
}

func scan(value string) []Leak {
	ents, err := os.ReadDir(procfs.Path)
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var leaks []Leak
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		ok, helper := carries(pid, value)
		if !ok {
			continue
		}
		cmd, _ := os.ReadFile(procfs.PIDFile(pid, "cmdline"))
		leaks = append(leaks, Leak{
			PID:     pid,
			Command: strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))),
			Helper:  helper,
		})
	}
	return leaks
}

func check(value string, grace time.Duration) []Leak {
	leaks := scan(value)
	if len(leaks) == 0 {
		return nil
	}
	// Wait for each to exit on its pidfd, all against one deadline: a
	// process killed by a test's cleanup a moment ago is still exiting.
	deadline := time.Now().Add(grace)
	var left []Leak
	for _, l := range leaks {
		fd := pidfd.Open(l.PID)
		if fd < 0 {
			continue // gone already
		}
		exited := pidfd.Wait([]int{fd}, deadline)
		pidfd.Close(fd)
		if !exited {
			// Still running; a zombie has no environment left, so
			// carries is false for one that exited unreaped.
			if ok, _ := carries(l.PID, value); ok {
				left = append(left, l)
			}
		}
	}
	return left
}

func kill(value string, leaks []Leak) {
	for _, l := range leaks {
		// internal/pidfd's protocol, with a pidfd only: checked after the
		// pidfd pins the process, so the PID cannot be reused meanwhile.
		fd, ok := pidfd.Pin(l.PID, func() bool {
			ok, _ := carries(l.PID, value)
			return ok
		})
		if ok && fd >= 0 {
			_ = pidfd.Signal(l.PID, fd, unix.SIGKILL)
		}
		pidfd.Close(fd)
	}
}
