package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/server"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

// *client.Client is what `nimbus fs` runs against.
var _ remoteFS = (*client.Client)(nil)

// dialFS connects to the server at NIMBUS_ADDR as NIMBUS_USER (else the OS
// user). The returned func closes the connection.
func dialFS(ctx context.Context) (remoteFS, meta.User, func(), error) {
	addr := client.AddrFromEnv()
	c, err := client.Dial(ctx, addr, client.Options{Job: client.JobFromEnv()})
	if err != nil {
		return nil, meta.User{}, nil, dialError(addr, err)
	}
	return c, client.DefaultUser(), func() { _ = c.Close() }, nil
}

// dialError says what to do when no server answers at addr.
func dialError(addr string, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("connecting to %s (NIMBUS_ADDR): %w; is the server running? Start one with `nimbus serve --daemon` (or `nimbus serve`), or set NIMBUS_ADDR to where it listens", addr, err)
	}
	return fmt.Errorf("connecting to %s (NIMBUS_ADDR): %w", addr, err)
}

// fsckRemote asks the running server at NIMBUS_ADDR to check the namespace.
func fsckRemote(ctx context.Context) (*meta.FsckReport, error) {
	addr := client.AddrFromEnv()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return nil, dialError(addr, err)
	}
	defer c.Close()
	return c.Fsck(ctx)
}

// fsckLocal checks the store of a stopped server. dir is the server's data
// directory (the store is dir/meta, the block replicas dir/blocks) or the
// store directory itself (its blocks are then ../blocks). The store is
// opened read-only: nothing in dir is created or changed, so a read-only
// copy can be checked; a running server's directory is refused (locked).
func fsckLocal(ctx context.Context, dir string) (rep *meta.FsckReport, err error) {
	dataDir := dir
	if fi, err := os.Stat(server.StoreDir(dir)); err == nil && fi.IsDir() {
		dir = server.StoreDir(dir)
	} else {
		dataDir = filepath.Dir(filepath.Clean(dir))
	}
	blocksDir := ""
	if filepath.Clean(dir) == server.StoreDir(dataDir) { // a server's layout: look for its blocks
		if fi, err := os.Stat(server.BlocksDir(dataDir)); err == nil && fi.IsDir() {
			blocksDir = server.BlocksDir(dataDir)
		}
	}
	// Open creates a store where there is none; fsck must not.
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("no store in %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("no store in %s: not a directory", dir)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) == 0 {
		return nil, fmt.Errorf("no store in %s: the directory is empty", dir)
	}
	so := pebblestore.DefaultOptions()
	so.ReadOnly = true
	st, err := pebblestore.Open(dir, so)
	if errors.Is(err, syscall.EAGAIN) {
		return nil, fmt.Errorf("opening the store in %s: it is locked; is a server running on it? (%w)", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the store in %s: %w", dir, err)
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	cfg := namespace.DefaultConfig()
	cfg.CheckOnly = true
	if blocksDir != "" {
		// The block replicas are checked against the rows too.
		bc := local.DefaultConfig()
		bc.ReadOnly = true
		bs, err := local.Open(blocksDir, bc)
		if err != nil {
			return nil, fmt.Errorf("opening the block storage in %s: %w", blocksDir, err)
		}
		defer func() { err = errors.Join(err, bs.Close()) }()
		cfg.Blocks = bs
	}
	eng, err := namespace.New(st, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the namespace in %s: %w", dir, err)
	}
	defer func() { err = errors.Join(err, eng.Close()) }()
	return eng.Fsck(ctx)
}

// fsckPostgres checks the namespace in the PostgreSQL database at url,
// reading it directly: the check writes nothing, and the servers on the
// database may run meanwhile (each directory is checked from one snapshot
// of its entries, as a server's own fsck does). Blocks stay on each
// server's local storage, so they are checked by `nimbus fsck` through a
// server (NIMBUS_ADDR), not here.
func fsckPostgres(ctx context.Context, url string) (rep *meta.FsckReport, err error) {
	opts := pgstore.DefaultOptions()
	opts.PoolSize = 2
	opts.NoCreate = true
	st, err := pgstore.Open(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	cfg := namespace.DefaultConfig()
	cfg.CheckOnly = true
	eng, err := namespace.New(st, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the namespace in the database: %w", err)
	}
	defer func() { err = errors.Join(err, eng.Close()) }()
	return eng.Fsck(ctx)
}
