package namespace

import (
	"bytes"
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
)

// TestCachedFileContent: a small file's bytes are read from the store
// once, then from the cache (content hits, not store reads), by range
// too; an append, a truncate and an overwrite each change what the next
// read returns (the bytes go with the hot attributes the write
// invalidates); a file being written is never served from the cache.
func TestCachedFileContent(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, _, err := openEngineDirWith(t.TempDir(), func(cfg *Config) {
		c, err := cache.New(cache.Config{MaxBytes: 8 << 20, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Cache = c
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	hits := func() float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "nimbus_cache_hits_total" {
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "kind" && l.GetValue() == "content" {
							return m.GetCounter().GetValue()
						}
					}
				}
			}
		}
		return -1
	}
	read := func(off, n int64) []byte {
		t.Helper()
		b, err := e.Read(ctx, root, "/d/f", off, n)
		must(t, err)
		return b
	}
	must(t, e.Mkdirs(ctx, root, "/d", 0))
	writeFile(t, e, root, "/d/f", []byte("hello, world"))
	if got := read(0, 1<<20); string(got) != "hello, world" {
		t.Fatalf("first read %q", got)
	}
	h0 := hits()
	if got := read(0, 1<<20); string(got) != "hello, world" || hits() != h0+1 {
		t.Fatalf("second read %q, content hits %v -> %v: want one hit", got, h0, hits())
	}
	if got := read(7, 3); string(got) != "wor" || hits() != h0+2 {
		t.Fatalf("range read %q, hits %v", got, hits()-h0)
	}
	if got := read(100, 3); len(got) != 0 {
		t.Fatalf("read past the end %q", got)
	}
	got := read(0, 1<<20)
	got[0] = 'X' // the caller's copy: the cache's bytes must not change
	if again := read(0, 1<<20); string(again) != "hello, world" {
		t.Fatalf("a caller changed the cached bytes: %q", again)
	}

	// Append: open for append (under construction: not from the cache),
	// write, complete.
	_, err = e.Append(ctx, root, "/d/f", "c1")
	must(t, err)
	must(t, e.Write(ctx, root, "/d/f", "c1", 12, []byte("!!")))
	if got := read(0, 1<<20); !bytes.HasPrefix(got, []byte("hello, world")) {
		t.Fatalf("read while appending %q", got)
	}
	_, err = e.Complete(ctx, root, "/d/f", "c1")
	must(t, err)
	read(0, 1<<20) // fill
	if got := read(0, 1<<20); string(got) != "hello, world!!" {
		t.Fatalf("after append %q", got)
	}
	must(t, e.Truncate(ctx, root, "/d/f", 5))
	if got := read(0, 1<<20); string(got) != "hello" {
		t.Fatalf("after truncate %q", got)
	}
	read(0, 1<<20)
	writeFile(t, e, root, "/d/f", []byte("other"))
	if got := read(0, 1<<20); string(got) != "other" {
		t.Fatalf("after overwrite %q", got)
	}
	if err := e.Delete(ctx, root, "/d/f", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Read(ctx, root, "/d/f", 0, 10); meta.KindOf(err) != meta.KindNotFound {
		t.Fatalf("read after delete: %v", err)
	}
}
