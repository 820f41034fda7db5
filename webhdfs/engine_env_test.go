package webhdfs

import (
	"context"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// testInline is the engine's inline threshold in these tests: large enough
// for the multi-chunk uploads, small enough to test the size limit.
const testInline = 4 << 20

// openEngine returns the real namespace engine on a Pebble store in a
// temporary directory, with "root" as superuser and "/" open to everyone (mode
// 0777) so that tests can write as any user.
func openEngine(t testing.TB) meta.FileSystem {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
	if err != nil {
		t.Fatalf("pebblestore.Open: %v", err)
	}
	cfg := namespace.DefaultConfig()
	cfg.Superuser = "root"
	cfg.Groups = func(string) []string { return nil }
	cfg.InlineThreshold = testInline
	cfg.DefaultReplication = 3
	cfg.MinBlockSize = 0 // the tests' 1 KB blocks, as HDFS's test configurations allow
	eng, err := namespace.New(st, cfg)
	if err != nil {
		_ = st.Close()
		t.Fatalf("namespace.New: %v", err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	if err := eng.SetPermission(context.Background(), meta.User{Name: "root"}, "/", 0o777); err != nil {
		t.Fatalf("chmod /: %v", err)
	}
	return eng
}

// countFS wraps a FileSystem and records what the gateway asked of it.
type countFS struct {
	meta.FileSystem
	mu         sync.Mutex
	calls      map[string]int
	writeSizes []int
	readLens   []int64
}

func newCountFS(fs meta.FileSystem) *countFS {
	return &countFS{FileSystem: fs, calls: map[string]int{}}
}

func (c *countFS) count(m string) {
	c.mu.Lock()
	c.calls[m]++
	c.mu.Unlock()
}

// Calls returns how often method was called.
func (c *countFS) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// WriteSizes returns the data length of every Write call.
func (c *countFS) WriteSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.writeSizes...)
}

// ReadLengths returns the length argument of every Read call.
func (c *countFS) ReadLengths() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.readLens...)
}

func (c *countFS) Create(ctx context.Context, u meta.User, p string, o meta.CreateOptions) (*meta.FileStatus, error) {
	c.count("Create")
	return c.FileSystem.Create(ctx, u, p, o)
}

func (c *countFS) Write(ctx context.Context, u meta.User, p, client string, off int64, data []byte) error {
	err := c.FileSystem.Write(ctx, u, p, client, off, data)
	c.mu.Lock()
	c.calls["Write"]++
	c.writeSizes = append(c.writeSizes, len(data))
	c.mu.Unlock()
	return err
}

func (c *countFS) Read(ctx context.Context, u meta.User, p string, off, n int64) ([]byte, error) {
	c.mu.Lock()
	c.calls["Read"]++
	c.readLens = append(c.readLens, n)
	c.mu.Unlock()
	return c.FileSystem.Read(ctx, u, p, off, n)
}

func (c *countFS) List(ctx context.Context, u meta.User, dir, after string, limit int) (*meta.Listing, error) {
	c.count("List")
	return c.FileSystem.List(ctx, u, dir, after, limit)
}
