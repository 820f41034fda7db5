package client_test

import (
	"testing"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/fstest"
	"github.com/nimbus-fs/nimbus/namespace"
)

// TestFileSystem runs the behaviour suite against the client, over the RPC
// on a loopback socket to a server of the engine on Pebble: the client
// passes every capability through, errors included, and names the leases
// of a create that names none.
func TestFileSystem(t *testing.T) {
	const maxFile = 1 << 20
	caps := fstest.AllCaps()
	caps.OwnClientName = true
	fstest.Run(t, fstest.Config{
		Superuser: "root",
		MaxFile:   maxFile,
		ListLimit: namespace.DefaultConfig().ListLimit,
		Defaults:  &meta.ServerDefaults{Replication: 3, BlockSize: 128 << 20, InlineThreshold: maxFile},
		Caps:      caps,
	}, func(t *testing.T) meta.FileSystem {
		e := engineWith(t, func(c *namespace.Config) {
			c.InlineThreshold = maxFile
			c.DefaultReplication = 3
		})
		return dial(t, serve(t, e, nil), client.Options{})
	})
}
