package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
)

// startShared starts a server on PostgreSQL database db and etcd
// coordinator coord, with a metadata cache of cacheBytes (0: none).
func startShared(t *testing.T, db, coord string, cacheBytes int64) *Server {
	t.Helper()
	cfg := testConfig(t)
	cfg.StoreURL = db
	cfg.Coordinator, cfg.CoordinatorTTL = coord, 2*time.Second
	cfg.Namespace.Superuser = "root"
	cfg.CacheBytes = cacheBytes
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// TestCoherenceMixedCluster: a server with a cache and one without, on one
// PostgreSQL database and one etcd. The uncached one takes part in
// coherence: its chmod and its create are seen at once through the cached
// one (a stat that answered from the cache before, a listing the cache
// held), and the cached one's writes do not wait for it (it is a member
// that caches nothing: no INV goes to it, none fails).
func TestCoherenceMixedCluster(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	db := pgtest.DB(t)
	coord := fmt.Sprintf("etcd://%s/test-mixed-%d", strings.Join(eps, ","), time.Now().UnixNano())
	cached := startShared(t, db, coord, 1<<20)
	plain := startShared(t, db, coord, 0)
	if cached.coherence == nil || plain.coherence == nil {
		t.Fatalf("coherence loops: cached %v, uncached %v; want both", cached.coherence != nil, plain.coherence != nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard only
	defer cancel()
	root := meta.User{Name: "root"}
	c, p := cached.Engine(), plain.Engine()
	if err := c.Mkdirs(ctx, root, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateFile(ctx, root, "/d/f", meta.CreateOptions{Client: "t", Perm: 0o755}, nil); err != nil {
		t.Fatal(err)
	}
	// The cached server fills its cache: the second stat and listing
	// answer from it.
	for range 2 {
		if st, err := c.Stat(ctx, root, "/d/f"); err != nil || st.Perm != 0o755 {
			t.Fatalf("stat /d/f through the cached server: %+v, %v", st, err)
		}
		if l, err := c.List(ctx, root, "/d", "", 100); err != nil || len(l.Entries) != 1 {
			t.Fatalf("list /d through the cached server: %+v, %v", l, err)
		}
	}

	if err := p.SetPermission(ctx, root, "/d/f", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CreateFile(ctx, root, "/d/g", meta.CreateOptions{Client: "t", Perm: 0o644}, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Stat(ctx, root, "/d/f"); err != nil || st.Perm != 0o700 {
		t.Errorf("stat /d/f through the cached server after the uncached one's chmod 700: %v, %v; want mode 700", st.Perm, err)
	}
	if l, err := c.List(ctx, root, "/d", "", 100); err != nil || len(l.Entries) != 2 {
		var names []string
		if l != nil {
			for _, e := range l.Entries {
				names = append(names, e.Path)
			}
		}
		t.Errorf("list /d through the cached server after the uncached one's create of /d/g: %v, %v; want f and g", names, err)
	}

	// A write through the cached server commits without the uncached one.
	if err := c.SetPermission(ctx, root, "/d/f", 0o711); err != nil {
		t.Fatalf("chmod through the cached server: %v", err)
	}
	if st, err := p.Stat(ctx, root, "/d/f"); err != nil || st.Perm != 0o711 {
		t.Errorf("stat /d/f through the uncached server: %v, %v; want mode 711", st.Perm, err)
	}
	if n := metric(t, cached, "nimbus_coherence_send_errors_total"); n != 0 {
		t.Errorf("the cached server counted %v coherence send errors, want 0", n)
	}
}
