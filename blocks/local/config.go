package local

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Store.
type Config struct {
	// BufferSize is the size of a writer's buffer and of a reader's read
	// unit, in bytes: a multiple of 512 in [4 KiB, 64 MiB]. Each open writer
	// and each open read stream holds one buffer.
	BufferSize int
	// ReadOnly opens existing replicas for reading only (offline fsck of a
	// copy on a read-only file system): nothing in the directory is created
	// or changed, so Open repairs nothing that a crash left (those replicas
	// are loaded as found, or left out), the directory lock is a shared one
	// through a read-only descriptor, and the caller must not write.
	ReadOnly bool
	// Logger receives recoveries and the clean-up done by Open. Nil: discarded.
	Logger *slog.Logger
	// Registerer receives the store's metrics (metrics.go). Nil: not registered.
	Registerer prometheus.Registerer
}

// DefaultConfig returns 1 MiB buffers.
func DefaultConfig() Config {
	return Config{BufferSize: 1 << 20}
}

// ErrConfig is wrapped by Validate's errors.
var ErrConfig = errors.New("local: invalid config")

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.BufferSize < 4<<10 || c.BufferSize > 64<<20 || c.BufferSize%bytesPerCRC != 0 {
		return fmt.Errorf("%w: BufferSize = %d, want a multiple of %d in [4 KiB, 64 MiB]", ErrConfig, c.BufferSize, bytesPerCRC)
	}
	return nil
}
