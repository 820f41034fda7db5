package datanode

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/datanode/registry"
)

// Config configures a DataNode.
type Config struct {
	// Dir is the storage directory (created if missing).
	Dir string
	// Zone is the availability zone the DataNode runs in ("" for none):
	// placement spreads a block's replicas over zones.
	Zone string
	// Host is the host name published for operators and for placement's
	// same-host test; "": os.Hostname.
	Host string
	// DataAddr is the data transfer port's listen address (HDFS's
	// dfs.datanode.address, port 9866). A listen address without a host
	// ("" or unspecified) is published with Host.
	DataAddr string
	// HTTPAddr is the HTTP port's listen address (/metrics, /healthz;
	// HDFS's dfs.datanode.http.address, port 9864).
	HTTPAddr string
	// Liveness is how NameNodes judge this DataNode: Heartbeat is its
	// period; the DataNode reports itself unhealthy (/healthz) when it has
	// not beaten for StaleAfter, and sends a full report after a silence
	// of DeadAfter (the NameNodes took it for dead).
	Liveness registry.Config
	// FullReportInterval is the period of full block reports (HDFS's
	// dfs.blockreport.intervalMsec, 6 h); one is always sent at start.
	FullReportInterval time.Duration
	// FullReportInitialDelay spreads the first full report over a random
	// delay in [0, FullReportInitialDelay) (HDFS's
	// dfs.blockreport.initialDelay), so that DataNodes started together do
	// not report together. 0: at once.
	FullReportInitialDelay time.Duration
	// UsageInterval is how often the space its replicas take is added up
	// again between full reports (HDFS's fs.du.interval, 10 min).
	UsageInterval time.Duration
	// Reserved is the free space, in bytes, kept for other uses of the
	// volume (HDFS's dfs.datanode.du.reserved): with less free than this
	// the DataNode is full and takes no new replicas.
	Reserved int64
	// Blocks configures the replica store (blocks/local).
	Blocks local.Config
	// Transfer configures the data transfer server (dataxfer.Server) that
	// serves DataAddr.
	Transfer TransferConfig
	// NoBlockTokens serves data ops without checking block tokens (HDFS's
	// dfs.block.access.token.enable false). By default every op must carry
	// a token issued under a key derived from the cluster secret.
	NoBlockTokens bool
	// ReplicationBandwidth bounds the bytes per second of the DataNode's
	// background transfers taken together (the replicas it copies to other
	// DataNodes when told to: HDFS's dfs.datanode.balance.bandwidthPerSec);
	// 0: unbounded.
	ReplicationBandwidth int64
	// NewDataServer makes the data transfer server that serves DataAddr.
	// Nil: a dataxfer.Server configured by Transfer.
	NewDataServer func(DataServerEnv) (DataServer, error)
	// Version is the software version published in the DataNode's row.
	Version string
	// Logger receives the DataNode's events; nil: discarded.
	Logger *slog.Logger
	// Registerer receives the DataNode's metrics (and its replica store's);
	// Gatherer is what /metrics serves. Nil: not registered; /metrics
	// serves an empty registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// DefaultConfig returns HDFS's defaults: data port 9866, HTTP port 9864,
// heartbeats every 3 s (stale after 30 s, dead after 10 min 30 s), full
// reports every 6 h, usage every 10 min, nothing reserved.
func DefaultConfig() Config {
	return Config{
		DataAddr:           ":9866",
		HTTPAddr:           ":9864",
		Liveness:           registry.DefaultConfig(),
		FullReportInterval: 6 * time.Hour,
		UsageInterval:      10 * time.Minute,
		Blocks:             local.DefaultConfig(),
		Transfer:           defaultTransferConfig(),
	}
}

// ErrConfig is wrapped by Validate's errors.
var ErrConfig = errors.New("datanode: invalid config")

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: no storage directory", ErrConfig)
	case len(c.Zone) > 255:
		return fmt.Errorf("%w: a zone name of %d bytes", ErrConfig, len(c.Zone))
	case c.FullReportInterval <= 0:
		return fmt.Errorf("%w: FullReportInterval = %v, want > 0", ErrConfig, c.FullReportInterval)
	case c.FullReportInitialDelay < 0:
		return fmt.Errorf("%w: FullReportInitialDelay = %v, want >= 0", ErrConfig, c.FullReportInitialDelay)
	case c.UsageInterval <= 0:
		return fmt.Errorf("%w: UsageInterval = %v, want > 0", ErrConfig, c.UsageInterval)
	case c.Reserved < 0:
		return fmt.Errorf("%w: Reserved = %d, want >= 0", ErrConfig, c.Reserved)
	case c.ReplicationBandwidth < 0:
		return fmt.Errorf("%w: ReplicationBandwidth = %d, want >= 0", ErrConfig, c.ReplicationBandwidth)
	case c.NewDataServer == nil && (c.Transfer.MaxConns <= 0 || c.Transfer.Timeout <= 0 || c.Transfer.KeepAlive < 0):
		return fmt.Errorf("%w: Transfer = %+v, want MaxConns > 0, Timeout > 0, KeepAlive >= 0", ErrConfig, c.Transfer)
	}
	if err := c.Liveness.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return c.Blocks.Validate()
}
