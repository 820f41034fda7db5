package linearizability

import (
	"fmt"
	"testing"

	"github.com/nimbus-fs/nimbus/internal/linmodel"
)

// TestLinearizableMixedServers: a cached server and one without a cache
// (`--cache-bytes 0`) on one database and etcd, clients spread over both:
// the uncached one takes part in coherence (its writes invalidate the
// cached one's cache; nobody waits for its ACK), and the histories are
// linearizable.
func TestLinearizableMixedServers(t *testing.T) {
	fss, procs := startCoherentServersEach(t, 2, func(i int) []string {
		if i == 1 {
			return []string{"--cache-bytes", "0"}
		}
		return nil
	})
	for _, seed := range seeds(t, 8) {
		h := recordOn(t, fss, fmt.Sprintf("/m%d", seed), seed, mix{clients: 6, ops: 25})
		check(t, "mixed-servers", seed, h, linmodel.Initial())
	}
	cached, plain := scrape(t, procs[0].URL()), scrape(t, procs[1].URL())
	if cached.sum("nimbus_cache_hits_total", "kind", "entry") == 0 {
		t.Error("the cached server answered nothing from its cache: the test does not exercise it")
	}
	if n := plain.sum("nimbus_coherence_messages_sent_total", "type", "INV"); n == 0 {
		t.Error("the uncached server sent no INV: its writes invalidated nobody")
	}
	if n := cached.sum("nimbus_coherence_send_errors_total", "", ""); n != 0 {
		t.Errorf("the cached server had %v coherence send errors, want 0", n)
	}
	if n := plain.sum("nimbus_coherence_messages_received_total", "type", "INV"); n != 0 {
		t.Errorf("the uncached server received %v INVs, want none (it caches nothing)", n)
	}
}
