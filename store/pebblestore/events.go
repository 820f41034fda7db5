package pebblestore

import (
	"errors"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
)

// eventListener reports Pebble's trouble in the store's log and metrics, and
// fails the store on a background error that Pebble would retry for ever
// without success.
//
// A flush or compaction that failed for want of space (ENOSPC, EDQUOT) fails
// the store: Pebble retries it at once, in a loop, and once its memtables
// are full every commit waits in a write stall ("memtable count limit
// reached") for a flush that cannot succeed, while the store looks healthy.
// A store whose logs were recycled or preallocated meets a full disk there
// first, not in its log (whose writes land in blocks it already has), so
// this is how such a store notices. Space freed meanwhile does not help: the
// store has failed, and a restart once space is freed recovers every
// acknowledged commit from the log. Other background errors (EIO on a
// table, which Pebble writes anew on the next try) are logged, rate-limited,
// and left to Pebble's retries; they are also the moment to look at the
// directory, which a flush into a removed one is the first to notice.
//
// Once the store has failed, a background error parks Pebble's goroutine
// (failstop.go) instead of letting Pebble retry at once for ever: each retry
// burned a core and logged a line.
func (s *Store) eventListener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			if ok, skipped := s.logLimit.allow("background error"); ok {
				s.log.Error("pebble background error", "dir", s.dir, "err", err.Error(), "repeats_not_logged", skipped)
			}
			if m := s.metrics; m != nil {
				m.backgroundErrors.Inc()
			}
			if diskFull(err) {
				s.failStop("flush or compaction", err)
			} else {
				s.checkDir("check data directory")
			}
			if s.failed() != nil && !onStorePath() {
				park()
			}
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			if ok, skipped := s.logLimit.allow("write stall"); ok {
				s.log.Warn("pebble write stall: commits wait for flushes", "dir", s.dir, "reason", info.Reason, "repeats_not_logged", skipped)
			}
		},
		WriteStallEnd: func() {
			if ok, skipped := s.logLimit.allow("write stall ended"); ok {
				s.log.Info("pebble write stall ended", "dir", s.dir, "repeats_not_logged", skipped)
			}
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			if ok, skipped := s.logLimit.allow("disk slow"); ok {
				s.log.Warn("pebble disk slow", "dir", s.dir, "info", info.String(), "repeats_not_logged", skipped)
			}
		},
	}
}

// diskFull reports whether err says the file system (or the user's quota)
// has no room left.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
