package linearizability

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/routing"
)

// Servers in several deployments (docs/ELASTIC.md, "Deployments own cache
// entries"): each caches, besides directory rows, only the entries its
// deployment owns, and a write invalidates those only at the owner's
// servers. Clients still reach any server.

// startDeployedServers starts n cached servers, server i in deployment
// i mod deployments.
func startDeployedServers(t *testing.T, n, deployments int, args ...string) ([]meta.FileSystem, []*testproc.Server) {
	t.Helper()
	return startCoherentServersEach(t, n, func(i int) []string {
		return []string{"--deployments", strconv.Itoa(deployments), "--deployment", strconv.Itoa(i % deployments)}
	}, args...)
}

// TestLinearizableDeployedServers: histories of clients spread over two
// cached servers of two deployments are linearizable, while most of the
// invalidations reach one deployment only.
func TestLinearizableDeployedServers(t *testing.T) {
	fss, procs := startDeployedServers(t, 2, 2)
	start := time.Now()
	ops := 0
	for _, seed := range seeds(t, 8) {
		base := fmt.Sprintf("/s%d", seed)
		h := recordOn(t, fss, base, seed, mix{clients: 6, ops: 25})
		check(t, "deployed-servers", seed, h, linmodel.Initial())
		ops += len(h)
	}
	t.Logf("%d operations in %s", ops, time.Since(start).Round(time.Millisecond))
	for i, p := range procs {
		m := scrape(t, p.URL())
		t.Logf("server %d (deployment %d): cache hits %v (entry) %v (attrs) %v (listing), INV sent %v, writes committed %v",
			i, i, m.sum("nimbus_cache_hits_total", "kind", "entry"), m.sum("nimbus_cache_hits_total", "kind", "attrs"),
			m.sum("nimbus_cache_hits_total", "kind", "listing"),
			m.sum("nimbus_coherence_messages_sent_total", "type", "INV"), m.sum("nimbus_coherence_writes_total", "result", "committed"))
		if m.sum("nimbus_cache_hits_total", "kind", "entry") == 0 {
			t.Errorf("server %d answered nothing from its cache: the test does not exercise it", i)
		}
	}
}

// TestDeployedFailsWithoutOwnership: the same servers filling entries
// their deployment does not own (--cache-disable-ownership), while writes
// still invalidate them only at the owner's, serve stale rows, and the
// checker sees it: the fill rule is what makes owned targets sound.
func TestDeployedFailsWithoutOwnership(t *testing.T) {
	fss, _ := startDeployedServers(t, 2, 2, "--cache-disable-ownership")
	start := time.Now()
	// Found at seeds 6, 10, 13 and 16 in four runs: 60 leaves a margin.
	seed := illegalSeed(t, fss, mix{clients: 6, ops: 25}, 60)
	if seed == 0 {
		t.Fatal("every history was linearizable with the fill ownership check off: the test cannot see a stale cache")
	}
	t.Logf("seed %d: not linearizable with the fill ownership check off, as expected (%s)", seed, time.Since(start).Round(time.Millisecond))
}

// TestDeploymentFigures measures the INV messages per create with n
// servers (NIMBUS_DEPLOY_SERVERS, default 4), each its own deployment, and
// with the same servers all in one deployment (every target reaches every
// server): creates of files spread over 16 directories, sent round robin to
// the servers (clients reach any server), then each sent to a server of
// the deployment that owns the file's directory (as request routing will).
func TestDeploymentFigures(t *testing.T) {
	n := 4
	if s := os.Getenv("NIMBUS_DEPLOY_SERVERS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 2 {
			t.Fatalf("NIMBUS_DEPLOY_SERVERS=%q: want 2 or more", s)
		}
	}
	for _, deployments := range []int{1, n} {
		t.Run(fmt.Sprintf("deployments=%d", deployments), func(t *testing.T) {
			fss, procs := startDeployedServers(t, n, deployments)
			ctx := context.Background()
			u := meta.User{Name: linmodel.Superuser}
			const dirs, creates = 16, 200
			ids := make([]uint64, dirs)
			for d := range dirs {
				p := fmt.Sprintf("/p/d%d", d)
				if err := fss[0].Mkdirs(ctx, u, p, 0o755); err != nil {
					t.Fatal(err)
				}
				st, err := fss[0].Stat(ctx, u, p)
				if err != nil {
					t.Fatal(err)
				}
				ids[d] = st.FileID
			}
			// Warm every server's cache with every directory and listing,
			// as clients spread over them would.
			for _, fs := range fss {
				for d := range dirs {
					if _, err := fs.List(ctx, u, fmt.Sprintf("/p/d%d", d), "", 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			invs := func() (inv, writes float64) {
				for _, p := range procs {
					m := scrape(t, p.URL())
					inv += m.sum("nimbus_coherence_messages_sent_total", "type", "INV")
					writes += m.sum("nimbus_coherence_writes_total", "result", "committed")
				}
				return inv, writes
			}
			for _, routed := range []bool{false, true} {
				inv0, w0 := invs()
				for i := range creates {
					d := i % dirs
					s := i % n
					if routed {
						// A server of the owner's deployment: servers s, s+D, ...
						s = routing.Owner(ids[d], deployments)
					}
					p := fmt.Sprintf("/p/d%d/f%d-%v", d, i, routed)
					if _, err := meta.CreateFile(ctx, fss[s], u, p, meta.CreateOptions{Client: "figures", Perm: 0o644}, nil); err != nil {
						t.Fatal(err)
					}
				}
				inv1, w1 := invs()
				how := "round robin"
				if routed {
					how = "to the owner"
				}
				t.Logf("%d servers, %d deployments, creates sent %s: %.0f creates, %.0f writes committed, %.0f INV: %.2f INV per create, %.2f per write",
					n, deployments, how, float64(creates), w1-w0, inv1-inv0, (inv1-inv0)/creates, (inv1-inv0)/(w1-w0))
			}
		})
	}
}
