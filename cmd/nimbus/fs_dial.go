package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/server"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// *client.Client is what `nimbus fs` runs against.
var _ remoteFS = (*client.Client)(nil)

// dialFS connects to the server at NIMBUS_ADDR as NIMBUS_USER (else the OS
// user). The returned func closes the connection.
func dialFS(ctx context.Context) (remoteFS, meta.User, func(), error) {
	addr := client.AddrFromEnv()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return nil, meta.User{}, nil, fmt.Errorf("connecting to %s (NIMBUS_ADDR): %w", addr, err)
	}
	return c, client.DefaultUser(), func() { _ = c.Close() }, nil
}

// fsckRemote asks the running server at NIMBUS_ADDR to check the namespace.
func fsckRemote(ctx context.Context) (*meta.FsckReport, error) {
	addr := client.AddrFromEnv()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s (NIMBUS_ADDR): %w", addr, err)
	}
	defer c.Close()
	return c.Fsck(ctx)
}

// fsckLocal checks the store of a stopped server. dir is the server's data
// directory (the store is dir/meta) or the store directory itself. The store
// is locked while it is open, so a running server's directory is refused.
func fsckLocal(ctx context.Context, dir string) (rep *meta.FsckReport, err error) {
	blocksDir := ""
	if fi, err := os.Stat(server.StoreDir(dir)); err == nil && fi.IsDir() {
		if fi, err := os.Stat(server.BlocksDir(dir)); err == nil && fi.IsDir() {
			blocksDir = server.BlocksDir(dir)
		}
		dir = server.StoreDir(dir)
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
	st, err := pebblestore.Open(dir, pebblestore.DefaultOptions())
	if errors.Is(err, syscall.EAGAIN) {
		return nil, fmt.Errorf("opening the store in %s: it is locked; is a server running on it? (%w)", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the store in %s: %w", dir, err)
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	cfg := namespace.DefaultConfig()
	if blocksDir != "" {
		// The block replicas are checked against the rows too.
		bs, err := local.Open(blocksDir, local.DefaultConfig())
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
