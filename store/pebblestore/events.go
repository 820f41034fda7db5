package pebblestore

import (
	"github.com/cockroachdb/pebble/v2"
)

// eventListener reports Pebble's trouble in the store's log and metrics.
// A background error (a flush or compaction that failed, which Pebble
// retries) is not fatal by itself: a full disk that frees up lets it
// through. But it is the moment to look at the directory, which a flush
// into a removed one is the first to notice.
func (s *Store) eventListener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			s.log.Error("pebble background error", "dir", s.dir, "err", err)
			if m := s.metrics; m != nil {
				m.backgroundErrors.Inc()
			}
			s.checkDir("check data directory")
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			s.log.Warn("pebble write stall: commits wait for flushes", "dir", s.dir, "reason", info.Reason)
		},
		WriteStallEnd: func() {
			s.log.Info("pebble write stall ended", "dir", s.dir)
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			s.log.Warn("pebble disk slow", "dir", s.dir, "info", info.String())
		},
	}
}
