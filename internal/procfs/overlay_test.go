package procfs

import (
	"slices"
	"testing"
)

func TestOverlayLayers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, super string
		want        []string
	}{
		{"legacy list with upper", `rw,lowerdir=/a:/b\040c,upperdir=/u,workdir=/w,uuid=on`, []string{"/a", "/b c", "/u"}},
		{"escaped colon and comma", `rw,lowerdir=/x\134:y:/p\054q,upperdir=/u`, []string{"/x:y", "/p,q", "/u"}},
		{"data-only layers", `ro,lowerdir=/l1::/d1`, []string{"/l1", "/d1"}},
		{"new mount API", `rw,lowerdir+=/l1,lowerdir+=/l2,datadir+=/d,upperdir=/u,workdir=/w`, []string{"/l1", "/l2", "/d", "/u"}},
		{"no layers", `rw,relatime`, nil},
	} {
		if got := OverlayLayers(tc.super); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
