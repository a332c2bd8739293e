package agentproc_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentproc/agentproc"
)

// TestAttackEnvSecretsGrowEveryStream: the secret-looking values of a
// request's Env joined the Manager's set of started requests' secrets,
// which every stream redacted and which only grew while the Manager
// lived. An httpapi client (serve's tools: a request's "env") sends one
// request with values of 8,000 bytes under names such as T1_TOKEN, 120 of
// them within httpapi's 1 MiB body. Measured then: 24 values of random
// letters made the Start take 0.9 s and left 57 MiB more of the host's
// heap for good, about 2.4 MiB a secret, its forms and their index (12:
// 0.26 s and 26 MiB); each Start dearer than the last. Closed by the
// seventh mend: they go to the owner's set, bounded by MaxOwnerSecrets
// and MaxOwnerSecretBytes (64 KiB), which lets the oldest go that no
// running process carries. Here three Starts of one owner, five new
// values of 8,000 bytes each (40,000 bytes; two are past the bound):
// the heap after the third holds about what it held after the first, and
// a Start of twelve (96,000 bytes, past the bound alone) is refused with
// ErrInvalidRequest before anything is built. The control: a Start with
// no secret costs neither, and without the bound (a Manager-wide set
// only growing) the third Start's heap would be three times the first's.
func TestAttackEnvSecretsGrowEveryStream(t *testing.T) {
	m := newManager(t)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	rng := rand.New(rand.NewPCG(13, 13))
	values := func(n, size int) map[string]string {
		env := map[string]string{}
		for i := range n {
			b := make([]byte, size)
			for j := range b {
				b[j] = byte('a' + rng.IntN(26))
			}
			env[fmt.Sprintf("T%d_TOKEN", i)] = string(b)
		}
		return env
	}
	start := func(env map[string]string) time.Duration {
		begin := time.Now()
		p := mustStart(t, m, agentproc.Request{Command: "true", Env: env})
		took := time.Since(begin)
		mustWait(t, p)
		return took
	}
	before := heap()
	if took, grew := start(nil), heap()-min(before, heap()); took > time.Second || grew > 8<<20 {
		t.Fatalf("control: a Start without secrets took %v and grew the heap %d MiB", took, grew>>20)
	}
	const n, size = 5, 8000
	before = heap()
	var first uint64
	for i := range 3 {
		// The bound on the time is loose: under -race beside make
		// stress's CPU burners one Start of 40,000 bytes of secrets took
		// 1.01 s (the registration's forms and trie); the heap below is
		// what tells a bounded set from a growing one.
		if took := start(values(n, size)); took > 5*time.Second {
			t.Errorf("Start %d with %d secret-looking values of %d bytes took %v, want under 5 s", i+1, n, size, took)
		}
		if i == 0 {
			first = heap() - min(before, heap())
		}
	}
	third := heap() - min(before, heap())
	t.Logf("heap grown after the first Start %d KiB, after the third %d KiB", first>>10, third>>10)
	if third > first+first/2 {
		t.Errorf("the heap grew %d KiB after the first Start and %d KiB after the third, want the third within half again of the first: the owner's set is bounded",
			first>>10, third>>10)
	}
	begin := time.Now()
	_, err := m.Start(testContext(t), agentproc.Request{Command: "true", Env: values(12, size)})
	if !errors.Is(err, agentproc.ErrInvalidRequest) || !strings.Contains(err.Error(), "MaxOwnerSecretBytes") {
		t.Errorf("a Start with 12 values of %d bytes: got %v, want ErrInvalidRequest naming MaxOwnerSecretBytes", size, err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("the refused Start took %v, want under 1 s", took)
	}
}
