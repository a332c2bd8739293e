package agentproc

import (
	"encoding/binary"
	"unsafe"
)

// procStateZombie is SZOMB, the p_stat (XNU) and ki_stat (FreeBSD) of a
// process that has exited and waits to be reaped; both kernels use 5.
const procStateZombie = 5

// kinfoMember is what countGroup needs of one process record.
type kinfoMember struct {
	pgid int
	stat int8
}

// Offsets in FreeBSD's struct kinfo_proc (sys/user.h) on 64-bit systems:
// ki_structsize (int) at 0, ki_pgid after two ints and eight pointers,
// ki_stat after the fixed-size fields up to ki_traceflag.
// golang.org/x/sys/unix has no KinfoProc for FreeBSD, so the records are
// read by offset; the record size is taken from each record's own
// ki_structsize.
const (
	kinfoPgidOffset = 80
	kinfoStatOffset = 388
	kinfoMinSize    = kinfoStatOffset + 1
)

// parseKinfoProcs reads the pgid and state of each FreeBSD kinfo_proc
// record in buf, in the host's byte order. ok is false where the layout
// above does not apply (32-bit systems, where pointers and several fields
// are smaller) or a record is malformed; the caller then falls back to
// counting the group as alive.
func parseKinfoProcs(buf []byte) (members []kinfoMember, ok bool) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		return nil, false
	}
	order := binary.NativeEndian
	for len(buf) > 0 {
		if len(buf) < 4 {
			return nil, false
		}
		size := int(int32(order.Uint32(buf)))
		if size < kinfoMinSize || size > len(buf) {
			return nil, false
		}
		members = append(members, kinfoMember{
			pgid: int(int32(order.Uint32(buf[kinfoPgidOffset:]))),
			stat: int8(buf[kinfoStatOffset]),
		})
		buf = buf[size:]
	}
	return members, true
}
