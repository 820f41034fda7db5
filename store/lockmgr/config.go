package lockmgr

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Manager.
type Config struct {
	// Shards is the number of independently locked partitions of the lock
	// table, a power of two. More shards mean less contention on the shard
	// mutexes when many transactions lock different keys.
	Shards int
	// MaxWait bounds how long one Lock call waits before failing with
	// store.ErrLockTimeout. It is a safety net against deadlocks caused by
	// out-of-order locking, not a scheduling tool.
	MaxWait time.Duration
	// Logger receives timeouts at debug level. Nil means slog.Default()'s
	// handler is not used and nothing is logged.
	Logger *slog.Logger
	// Registerer receives the metrics (metrics.go). Nil: not registered.
	Registerer prometheus.Registerer
}

// DefaultConfig returns 64 shards and a 10 s maximum wait.
func DefaultConfig() Config {
	return Config{Shards: 64, MaxWait: 10 * time.Second}
}

// ErrConfig is wrapped by Validate's errors.
var ErrConfig = errors.New("lockmgr: invalid config")

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.Shards <= 0 || c.Shards&(c.Shards-1) != 0 {
		return fmt.Errorf("%w: Shards = %d, want a power of two > 0", ErrConfig, c.Shards)
	}
	if c.MaxWait <= 0 {
		return fmt.Errorf("%w: MaxWait = %v, want > 0", ErrConfig, c.MaxWait)
	}
	return nil
}
