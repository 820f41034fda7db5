package datanode

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// DataServer serves the data transfer protocol on the DataNode's data
// port: package dataxfer's Server unless Config.NewDataServer makes
// another.
type DataServer interface {
	// Serve accepts connections on l until Close, and then returns (nil or
	// an error wrapping net.ErrClosed). Any other error ends the DataNode.
	Serve(l net.Listener) error
	// Close stops serving: the listener and every open transfer.
	Close() error
}

// DataServerEnv is what the DataNode gives its data server.
type DataServerEnv struct {
	// Store holds the replicas. Every change made through it is sent to
	// the NameNodes in an incremental block report (received, finalized,
	// recovered, truncated, deleted, and replicas a read found corrupt), so
	// the server needs no hooks of its own for those.
	Store blocks.Store
	// Cluster and UUID name this DataNode: the block pool id a request's
	// block must carry, and the DataNode's identity.
	Cluster registry.Cluster
	UUID    string
	// TransferStarted counts a data transfer (a read, a write, a copy) in
	// flight until the returned func is called; heartbeats publish the
	// count (HDFS's xceivers), by which placement avoids busy DataNodes.
	TransferStarted func() (done func())
	// Tokens verifies block tokens under keys derived from the cluster
	// secret, as NameNodes issue them (nil when Config.NoBlockTokens).
	Tokens     *blocktoken.Manager
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// WriteStopper is implemented by a DataServer that can stop a write of a
// block in progress (dataxfer.Server): block recovery stops the writer
// before it reads the replica's length.
type WriteStopper interface {
	StopWrite(block uint64)
}

// TransferConfig configures the default data server (dataxfer.Server).
type TransferConfig struct {
	// MaxConns bounds the data connections served at once (HDFS's
	// dfs.datanode.max.transfer.threads, 4096); one more is closed at once.
	MaxConns int
	// Timeout bounds every read and write of a data connection (HDFS's
	// dfs.client.socket-timeout, 60 s): a silent peer loses its op, a
	// stalled pipeline fails.
	Timeout time.Duration
	// KeepAlive is how long a data connection waits for another op after a
	// read (HDFS's dfs.datanode.socket.reuse.keepalive, 4 s).
	KeepAlive time.Duration
	// MaxPacket bounds a packet's payload a peer may send (16 MiB).
	MaxPacket int
}

// defaultTransferConfig is dataxfer's defaults.
func defaultTransferConfig() TransferConfig {
	c := dataxfer.DefaultConfig(nil)
	return TransferConfig{MaxConns: c.MaxConns, Timeout: c.Timeout, KeepAlive: c.KeepAlive, MaxPacket: c.MaxPacket}
}

// newDataxferServer is the default data server: dataxfer.Server over the
// reporting store, its ops counted as transfers, tokens checked.
func newDataxferServer(tc TransferConfig, env DataServerEnv) (DataServer, error) {
	cfg := dataxfer.DefaultConfig(env.Store)
	cfg.MaxConns, cfg.Timeout, cfg.KeepAlive, cfg.MaxPacket = tc.MaxConns, tc.Timeout, tc.KeepAlive, tc.MaxPacket
	if env.Tokens != nil {
		cfg.Tokens = env.Tokens
		m := env.Tokens
		cfg.IssueToken = func(pool string, block uint64, modes ...blocktoken.AccessMode) blocktoken.Token {
			return m.IssueFor("", pool, block, tokenLifetime, modes...)
		}
	}
	var mu sync.Mutex
	var dones []func()
	cfg.Hooks.Xceivers = func(delta int) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case delta > 0:
			for range delta {
				dones = append(dones, env.TransferStarted())
			}
		case delta < 0:
			for ; delta < 0 && len(dones) > 0; delta++ {
				dones[len(dones)-1]()
				dones = dones[:len(dones)-1]
			}
		}
	}
	cfg.Logger, cfg.Registerer = env.Logger, env.Registerer
	return dataxfer.New(cfg)
}

// tokenLifetime is the lifetime of the block tokens a DataNode issues
// itself, for the DataNodes it sends replicas to (HDFS's
// dfs.block.access.token.lifetime, 10 h, is for clients; a DataNode's
// copy starts at once).
const tokenLifetime = 10 * time.Minute
