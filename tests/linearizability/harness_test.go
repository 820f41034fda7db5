package linearizability

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"

	"github.com/anishathalye/porcupine"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// Environment knobs (docs/TESTING-LINEARIZABILITY.md):
//
//	NIMBUS_LIN_SEED=n     run only seed n (replays a failure's operations)
//	NIMBUS_LIN_SEEDS=n    seeds per randomized test (default: per test)
//	NIMBUS_LIN_OUT=dir    where visualizations go (default: the temp dir)
const checkTimeout = 20 * time.Second

// seeds returns the seeds a randomized test runs: NIMBUS_LIN_SEED alone, or
// NIMBUS_LIN_SEEDS (else def) seeds from 1.
func seeds(t *testing.T, def int) []uint64 {
	t.Helper()
	if s := os.Getenv("NIMBUS_LIN_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("NIMBUS_LIN_SEED=%q: %v", s, err)
		}
		return []uint64{n}
	}
	if s := os.Getenv("NIMBUS_LIN_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("NIMBUS_LIN_SEEDS=%q: want a positive count", s)
		}
		def = n
	}
	if testing.Short() {
		def = max(1, def/4)
	}
	out := make([]uint64, def)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// openEngine opens the namespace engine over a Pebble store in a temporary
// directory; wrap, when set, wraps the store (the regression tests delay
// commits with it). Users other than root are in no group, as on a server
// where they have no account.
func openEngine(t *testing.T, wrap func(store.Store) store.Store) *namespace.Engine {
	return openEngineWith(t, wrap, false)
}

// openEngineWith is openEngine; with syncIDs every new inode's id is
// reserved durably on its own (an id batch of 1, no prefetch): a create then
// waits for a sync of the store between reading its path and committing,
// which widens the window of the subtree races from microseconds to a
// sync, without touching the engine.
func openEngineWith(t *testing.T, wrap func(store.Store) store.Store, syncIDs bool) *namespace.Engine {
	t.Helper()
	return openEngineCfg(t, wrap, syncIDs, nil)
}

// openEngineCfg is openEngineWith with edit applied to the engine's Config.
func openEngineCfg(t *testing.T, wrap func(store.Store) store.Store, syncIDs bool, edit func(*namespace.Config)) *namespace.Engine {
	t.Helper()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize = 8 << 20
	opts.MemTableSize = 4 << 20
	opts.RowCacheEntries = 1 << 14
	opts.ScanCacheBytes = 1 << 20
	opts.WALPrefill = 0
	if syncIDs {
		opts.IDPrefetch = 0
	}
	ps, err := pebblestore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var st store.Store = ps
	if wrap != nil {
		st = wrap(ps)
	}
	cfg := namespace.DefaultConfig()
	cfg.Superuser = linmodel.Superuser
	cfg.Groups = func(string) []string { return nil }
	if syncIDs {
		cfg.IDBatch = 1
	}
	if edit != nil {
		edit(&cfg)
	}
	e, err := namespace.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		ps.Close()
	})
	return e
}

// prepare makes base the model's root (mode linmodel.RootPerm, owned by the
// superuser) and runs linmodel.Setup in it, checking each result against the
// model.
func prepare(t *testing.T, fs meta.FileSystem, base string) {
	t.Helper()
	ctx := context.Background()
	root := meta.User{Name: linmodel.Superuser}
	if base != "" && base != meta.RootPath {
		if err := fs.Mkdirs(ctx, root, base, linmodel.RootPerm); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.SetPermission(ctx, root, linmodel.Abs(base, meta.RootPath), linmodel.RootPerm); err != nil {
		t.Fatal(err)
	}
	s := linmodel.NewState(linmodel.RootPerm)
	for _, in := range linmodel.Setup() {
		var want linmodel.Output
		want, s = linmodel.Spec(s, in)
		if got := linmodel.Run(ctx, fs, base, in); got.String() != want.String() {
			t.Fatalf("setup %s: got %s, the model says %s", in, got, want)
		}
	}
}

// mix is one randomized workload.
type mix struct {
	clients, ops int
}

// record runs one seed's workload on fs below base and returns its
// history. Client i is user linmodel.Users[i % 3] and draws its operations
// from its own generator, so a seed always gives the same operations.
func record(t *testing.T, fs meta.FileSystem, base string, seed uint64, m mix) []porcupine.Operation {
	t.Helper()
	return recordOn(t, []meta.FileSystem{fs}, base, seed, m)
}

// recordOn is record with client i calling fss[i % len(fss)]: NameNodes
// that serve one namespace from a shared store.
func recordOn(t *testing.T, fss []meta.FileSystem, base string, seed uint64, m mix) []porcupine.Operation {
	t.Helper()
	prepare(t, fss[0], base)
	return recordPrepared(fss, base, seed, m)
}

// recordPrepared is recordOn on a base directory already prepared.
func recordPrepared(fss []meta.FileSystem, base string, seed uint64, m mix) []porcupine.Operation {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := linmodel.NewRecorder()
	var wg sync.WaitGroup
	for c := range m.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := linmodel.NewGen(seed*64 + uint64(c))
			user := linmodel.Users[c%len(linmodel.Users)]
			for range m.ops {
				in := g.Next(user)
				rec.Do(ctx, fss[c%len(fss)], base, c, in)
			}
		}()
	}
	wg.Wait()
	return rec.History()
}

// check fails t unless h is linearizable, naming the seed, the command that
// replays it and the visualization. It returns the verdict.
func check(t *testing.T, name string, seed uint64, h []porcupine.Operation, init *linmodel.State) porcupine.CheckResult {
	t.Helper()
	if f := linmodel.Faults(h); len(f) > 0 {
		t.Fatalf("seed %d: %d calls failed outside the contract, first: %s", seed, len(f), f[0])
	}
	res, err := linmodel.Check(init, h, checkTimeout, os.Getenv("NIMBUS_LIN_OUT"), fmt.Sprintf("%s-seed%d", name, seed))
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != porcupine.Ok {
		t.Errorf("seed %d: history of %d operations is %s; visualization: %s\nreplay: NIMBUS_LIN_SEED=%d go test ./tests/linearizability -run '^%s$' -v\n%s",
			seed, len(h), res.Verdict, res.Viz, seed, t.Name(), describe(h))
	}
	return res.Verdict
}

// binary is the nimbus binary, built once for the package.
var binary string

func TestMain(m *testing.M) { testproc.Main(m, &binary) }

// startServer starts `nimbus serve` on a fresh data directory and returns a
// client connected to it.
func startServer(t *testing.T, args ...string) *client.Client {
	t.Helper()
	addr := testproc.Start(t, binary, "", "", append([]string{"--superuser", linmodel.Superuser}, args...)...).Addr
	c, err := client.Dial(context.Background(), "http://"+addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
