package agentproc

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

// kinfoRecord builds a FreeBSD kinfo_proc record of the amd64 size (0x440)
// with the given pgid and state.
func kinfoRecord(pgid int32, stat int8) []byte {
	b := make([]byte, 0x440)
	binary.NativeEndian.PutUint32(b, 0x440)
	binary.NativeEndian.PutUint32(b[kinfoPgidOffset:], uint32(pgid))
	b[kinfoStatOffset] = byte(stat)
	return b
}

func TestParseKinfoProcs(t *testing.T) {
	t.Parallel()
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the FreeBSD layout read here is the 64-bit one")
	}
	var buf []byte
	buf = append(buf, kinfoRecord(700, 2)...)               // running
	buf = append(buf, kinfoRecord(700, procStateZombie)...) // the exited shell
	buf = append(buf, kinfoRecord(701, 3)...)               // another group
	got, ok := parseKinfoProcs(buf)
	if !ok || len(got) != 3 {
		t.Fatalf("parse: got %v, %v, want 3 records", got, ok)
	}
	want := []kinfoMember{{700, 2}, {700, procStateZombie}, {701, 3}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range [][]byte{
		{1, 2},                  // shorter than ki_structsize
		kinfoRecord(1, 2)[:200], // cut short
		make([]byte, 0x440),     // ki_structsize 0
	} {
		if _, ok := parseKinfoProcs(bad); ok {
			t.Errorf("parse of %d malformed bytes: got ok, want not ok", len(bad))
		}
	}
	if got, ok := parseKinfoProcs(nil); !ok || len(got) != 0 {
		t.Errorf("parse of an empty group: got %v, %v, want none, ok", got, ok)
	}
}
