package agentproc

import (
	"os"
	"strconv"

	"github.com/google/uuid"
	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

// growPipe is a no-op: asyncPipe sets the buffer size at creation.
func growPipe(*os.File) {}

// pipeBuffer is the buffer asked for each direction of a pipe.
const pipeBuffer = 64 << 10

// childStdin: the child of a Start without Stdin gets os/exec's own NUL.
func childStdin() *os.File { return nil }

// outputPipe returns the pipe the child writes its output to, with an
// overlapped read end for this process (see asyncPipe).
func outputPipe() (r, w *os.File, err error) {
	parent, child, err := asyncPipe(true)
	return parent, child, err
}

// inputPipe returns the pipe the child reads its stdin from, with an
// overlapped write end for this process.
func inputPipe() (r, w *os.File, err error) {
	parent, child, err := asyncPipe(false)
	return child, parent, err
}

// asyncPipe makes a pipe whose end in this process is opened for overlapped
// I/O and whose child end is an ordinary synchronous handle, as console
// programs expect. os.Pipe gives two synchronous ends, on which the runtime
// poller cannot work: SetReadDeadline fails and Close cannot cancel a
// pending Read, so a writer outside the job (a process started through
// runas, a member stuck in termination) would hold the output drain, and
// with it Wait and Close, forever. An overlapped handle passed to os.NewFile
// is associated with the runtime's I/O completion port, where deadlines
// work and Close cancels pending I/O.
//
// Anonymous pipes cannot be overlapped, so this is a named pipe with a
// random name, a single instance (FILE_FLAG_FIRST_PIPE_INSTANCE fails if the
// name exists), no remote clients, and the default security descriptor,
// which lets only this user's processes, administrators and SYSTEM write to
// it; the child end is opened at once, taking the only instance.
func asyncPipe(parentReads bool) (parent, child *os.File, err error) {
	name := `\\.\pipe\agentproc-` + strconv.Itoa(os.Getpid()) + "-" + uuid.NewString()
	name16, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, nil, err
	}
	access, childAccess := uint32(windows.PIPE_ACCESS_INBOUND), uint32(windows.GENERIC_WRITE|windows.FILE_READ_ATTRIBUTES)
	if !parentReads {
		access, childAccess = windows.PIPE_ACCESS_OUTBOUND, windows.GENERIC_READ|windows.FILE_WRITE_ATTRIBUTES
	}
	server, err := windows.CreateNamedPipe(name16,
		access|windows.FILE_FLAG_OVERLAPPED|windows.FILE_FLAG_FIRST_PIPE_INSTANCE,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS,
		1, pipeBuffer, pipeBuffer, 0, nil)
	if err != nil {
		return nil, nil, xerrors.Errorf("create named pipe: %w", err)
	}
	client, err := windows.CreateFile(name16, childAccess, 0, nil, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		_ = windows.CloseHandle(server)
		return nil, nil, xerrors.Errorf("open named pipe: %w", err)
	}
	return os.NewFile(uintptr(server), "|0"), os.NewFile(uintptr(client), "|1"), nil
}
