package bench_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// fsckFS is a MemFS with a clean fsck.
type fsckFS struct{ *metatest.MemFS }

func (fsckFS) Fsck(context.Context) (*meta.FsckReport, error) {
	return &meta.FsckReport{Inodes: 1}, nil
}

// lossyFS acknowledges every fifth create without making the file: a
// server that loses acknowledged writes.
type lossyFS struct {
	fsckFS
	n, dropped atomic.Int64
}

func (l *lossyFS) CreateFile(ctx context.Context, u meta.User, p string, o meta.CreateOptions, data []byte) (*meta.FileStatus, error) {
	if l.n.Add(1)%5 == 0 {
		l.dropped.Add(1)
		return &meta.FileStatus{Path: p}, nil
	}
	if _, err := l.Create(ctx, u, p, o); err != nil {
		return nil, err
	}
	return l.Complete(ctx, u, p, o.Client)
}

// TestLedgerVerify: each way the namespace can disagree with what the
// clients were told is found, and nothing else.
func TestLedgerVerify(t *testing.T) {
	ctx := context.Background()
	env, mem := memEnv(t)
	env.FS = fsckFS{mem}
	create := func(p string) {
		t.Helper()
		if _, err := meta.CreateFile(ctx, mem, env.User, p, meta.CreateOptions{Client: "c", Perm: meta.DefaultFile}, nil); err != nil {
			t.Fatal(err)
		}
	}
	l := bench.NewLedger()
	for _, p := range []string{"/a", "/b", "/c"} {
		create(p)
		l.Created(p, nil)
	}
	if err := mem.Mkdirs(ctx, env.User, "/d", meta.DefaultDir); err != nil {
		t.Fatal(err)
	}
	l.Mkdir("/d", nil)
	_ = mem.Delete(ctx, env.User, "/b", false)
	l.Deleted("/b", nil)
	_ = mem.Rename(ctx, env.User, "/c", "/c2", meta.RenameOptions{})
	l.Renamed("/c", "/c2", nil)
	l.Created("/e", meta.Errorf("create", "/e", meta.ErrOutcomeUnknown, "lost"))
	l.Failed("stat", meta.Errorf("stat", "/a", meta.ErrBusy, "busy"))

	v := l.Verify(ctx, env, 4)
	if !v.OK || v.Present != 3 || v.Absent != 2 || v.Unknown != 1 || v.Errors["outcome_unknown"] != 1 || v.Errors["busy"] != 1 {
		t.Fatalf("a namespace that matches: %+v", v)
	}

	// An acknowledged create lost, a delete undone, a file where a
	// directory was made, a create answered "exists".
	_ = mem.Delete(ctx, env.User, "/a", false)
	create("/b")
	_ = mem.Delete(ctx, env.User, "/d", false)
	create("/d")
	create("/x")
	l.Created("/x", meta.Errorf("create", "/x", meta.ErrExists, "exists"))
	v = l.Verify(ctx, env, 4)
	if v.OK || v.Missing != 1 || v.Resurrected != 1 || v.WrongType != 1 || v.DoubleApplied != 1 || v.Unknown != 2 {
		t.Fatalf("a namespace that does not match: %+v", v)
	}
	if !strings.Contains(strings.Join(v.Samples, "\n"), "missing (acknowledged): /a") {
		t.Fatalf("samples %q", v.Samples)
	}

	// A delete of a present file answered "not found": applied twice.
	l2 := bench.NewLedger()
	l2.Created("/p", nil)
	l2.Deleted("/p", meta.Errorf("delete", "/p", meta.ErrNotFound, "gone"))
	if v := l2.Verify(ctx, env, 1); v.DoubleApplied != 1 || v.Unknown != 1 || v.OK {
		t.Fatalf("delete applied twice: %+v", v)
	}
	// No fsck: not OK.
	env.FS = mem
	if v := bench.NewLedger().Verify(ctx, env, 1); v.OK || v.FsckClean != nil {
		t.Fatalf("without fsck: %+v", v)
	}
}

// TestSpotifyVerify: a spotify run with Verify on a target that keeps
// what it acknowledges passes; on one that loses acknowledged creates
// it fails, with every lost create counted missing.
func TestSpotifyVerify(t *testing.T) {
	env, mem, tree := prepared(t, 300)
	env.FS = fsckFS{mem}
	cfg := bench.DefaultSpotifyConfig()
	cfg.BaseRate, cfg.Duration, cfg.Interval, cfg.Workers, cfg.PoolSize = 300, 2*time.Second, time.Second, 8, 100
	cfg.Mix, _ = bench.LookupMix("faults")
	cfg.Verify = true
	res, err := bench.Spotify(context.Background(), env, cfg, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := res.Spotify.Verdict
	if v == nil || !v.OK || v.Present < 50 || v.Absent < 20 || v.Missing != 0 {
		t.Fatalf("verdict %+v", v)
	}

	lossy := &lossyFS{fsckFS: fsckFS{mem}}
	env.FS = lossy
	cfg.Mix, _ = bench.ParseMix("creates", strings.NewReader("create 1\nstat 1\n"))
	res, err = bench.Spotify(context.Background(), env, cfg, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	v = res.Spotify.Verdict
	if v == nil || v.OK || v.Missing == 0 || int64(v.Missing) != lossy.dropped.Load() {
		t.Fatalf("lossy target: %d creates dropped, verdict %+v", lossy.dropped.Load(), v)
	}
}
