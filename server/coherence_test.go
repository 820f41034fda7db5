package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/clusterauth"
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

// sumMetric adds up every series of s's counter or gauge name (0 when it
// has none yet).
func sumMetric(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge() != nil {
				sum += m.GetGauge().GetValue()
			} else {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// forgedBatch encodes coherence messages as a client could, from the wire
// format (coherence/loop/wire.go): typ from `from` to `to`, one each for
// seqs, of writer's op, with one target (a key: kind 1, parent 1, name).
func forgedBatch(typ byte, from, to, writer string, seqs []uint64, name string) []byte {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	b := binary.AppendUvarint([]byte{1}, uint64(len(seqs)))
	for _, seq := range seqs {
		b = append(b, typ)
		b = str(b, from)
		b = str(b, to)
		b = binary.AppendVarint(b, 1<<40) // a join version no view has reached
		b = binary.AppendUvarint(b, 0)
		b = str(b, writer)
		b = binary.AppendUvarint(b, seq)
		if typ == 1 { // INV
			b = binary.AppendUvarint(b, 1)
			b = append(b, 1)
			b = binary.AppendUvarint(b, 1)
			b = str(b, name)
			b = binary.AppendUvarint(b, 0)
		} else {
			b = binary.AppendUvarint(b, 0)
		}
	}
	return b
}

// TestCoherenceRefusesNonMembers: POST /coherence shares the port clients
// reach, and only the cluster's servers may speak there. Two cached
// servers on one PostgreSQL database and one etcd; a client that knows a
// server's member id posts well-formed ACKs, RELEASEs and an INV from an
// invented peer, without a credential, with one made from another
// secret, and opens a stream without one: each is refused (401 without a
// credential, 403 with a bad one), counted as refused and never as
// received, and places no hold. The servers' own traffic still works: a
// write through one is seen at once through the other.
func TestCoherenceRefusesNonMembers(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	db := pgtest.DB(t)
	coord := fmt.Sprintf("etcd://%s/test-forge-%d", strings.Join(eps, ","), time.Now().UnixNano())
	a := startShared(t, db, coord, 1<<20)
	b := startShared(t, db, coord, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard only
	defer cancel()
	root := meta.User{Name: "root"}
	if err := b.Engine().Mkdirs(ctx, root, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Engine().Stat(ctx, root, "/d"); err != nil {
		t.Fatal(err)
	}
	id := a.Member().Member().ID
	// b's own traffic for /d (its RELEASE after the write is one-way) may
	// still be on its way to a: take the count once it has stopped moving.
	received := sumMetric(t, a, "nimbus_coherence_messages_received_total")
	for settled := time.Now().Add(10 * time.Second); time.Now().Before(settled); {
		time.Sleep(300 * time.Millisecond)
		now := sumMetric(t, a, "nimbus_coherence_messages_received_total")
		if now == received {
			break
		}
		received = now
	}

	stranger, err := clusterauth.New(bytes.Repeat([]byte{9}, clusterauth.SecretSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]uint64, 50)
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	for _, tc := range []struct {
		name  string
		body  []byte
		sign  *clusterauth.Key
		want  int
		setup func(*http.Request)
	}{
		{"ACKs for the server's own writes, no credential", forgedBatch(2, "intruder", id, id, seqs, ""), nil, http.StatusUnauthorized, nil},
		{"RELEASEs, no credential", forgedBatch(3, "intruder", id, "intruder", seqs, ""), nil, http.StatusUnauthorized, nil},
		{"an INV of /d, another secret's credential", forgedBatch(1, "intruder", id, "intruder", seqs[:1], "d"), stranger, http.StatusForbidden, nil},
		{"ACKs, another secret's credential", forgedBatch(2, "intruder", id, id, seqs, ""), stranger, http.StatusForbidden, nil},
		{"a stream, no credential", nil, nil, http.StatusUnauthorized, func(r *http.Request) {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "nimbus-coherence/1")
		}},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Addr()+"/coherence", bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.setup != nil {
			tc.setup(req)
		}
		if tc.sign != nil {
			tc.sign.Sign(req, tc.body)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols { // a stream's body never ends
			io.Copy(io.Discard, resp.Body)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.want)
		}
	}
	if got := sumMetric(t, a, "nimbus_coherence_messages_received_total"); got != received {
		t.Errorf("messages received went from %v to %v: forged messages were taken", received, got)
	}
	if got := sumMetric(t, a, "nimbus_coherence_requests_refused_total"); got != 5 {
		t.Errorf("refused requests: %v, want 5", got)
	}
	if got := metric(t, a, "nimbus_coherence_holds"); got != 0 {
		t.Errorf("holds: %v, want 0", got)
	}

	// The members' own traffic: b's chmod invalidates a's cache.
	if err := b.Engine().SetPermission(ctx, root, "/d", 0o700); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Engine().Stat(ctx, root, "/d"); err != nil || st.Perm != 0o700 {
		t.Errorf("stat /d through a after b's chmod 700: %v, %v", st.Perm, err)
	}
	if got := sumMetric(t, a, "nimbus_coherence_messages_received_total"); got <= received {
		t.Errorf("a received no member message for b's write")
	}
	if got := sumMetric(t, a, "nimbus_coherence_requests_refused_total"); got != 5 {
		t.Errorf("refused requests after the members' traffic: %v, want 5", got)
	}
}
