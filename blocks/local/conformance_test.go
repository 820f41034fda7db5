package local

import (
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/blocks/blocktest"
	"github.com/prometheus/client_golang/prometheus"
)

func TestConformance(t *testing.T) {
	blocktest.Run(t, func(t *testing.T, dir string) blocks.Store {
		cfg := DefaultConfig()
		cfg.Registerer = prometheus.NewRegistry()
		st, err := Open(dir, cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return st
	})
}

// TestConformanceSmallBuffer runs the suite with the smallest buffer, so
// that flushes happen every few chunks.
func TestConformanceSmallBuffer(t *testing.T) {
	blocktest.Run(t, func(t *testing.T, dir string) blocks.Store {
		cfg := DefaultConfig()
		cfg.BufferSize = 4096
		st, err := Open(dir, cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return st
	})
}
