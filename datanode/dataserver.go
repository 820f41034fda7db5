package datanode

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode/registry"
)

// DataServer serves the data transfer protocol on the DataNode's data
// port (package dataxfer's Server, wired in by the command through
// Config.NewDataServer).
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
	Logger          *slog.Logger
	Registerer      prometheus.Registerer
}

// closingServer is the data server when none is configured: it accepts
// connections and closes them at once, so that the published data address
// is the DataNode's, and a client fails fast.
type closingServer struct {
	log    *slog.Logger
	mu     sync.Mutex
	l      net.Listener
	closed atomic.Bool
}

func (s *closingServer) Serve(l net.Listener) error {
	s.mu.Lock()
	s.l = l
	s.mu.Unlock()
	if s.closed.Load() {
		l.Close()
		return net.ErrClosed
	}
	warned := false
	for {
		c, err := l.Accept()
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return net.ErrClosed
			}
			return err
		}
		if !warned {
			s.log.Warn("no data transfer server in this DataNode: closing data connections", "remote", c.RemoteAddr().String())
			warned = true
		}
		c.Close()
	}
}

func (s *closingServer) Close() error {
	s.closed.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.l != nil {
		return s.l.Close()
	}
	return nil
}
