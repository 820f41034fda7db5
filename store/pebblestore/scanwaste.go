package pebblestore

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Listings after churn. A rename or a delete leaves the old row's key in
// the memtable as a tombstone, and a row written again leaves its older
// versions: a directory whose files are renamed back and forth a hundred
// times holds a hundred versions of each name until the memtable is
// flushed (a flush keeps only the newest version of each key). Point reads
// do not notice, since a seek lands on the newest version, but a listing
// steps over every one of them. With 64 MB memtables that can last for
// minutes of light writing: measured, listings of the churned directories
// ran at half their speed after 100,000 renames.
//
// So a scan counts the entries its iterator stepped over without
// returning them, and one that steps over Options.ScanFlushTrigger or more
// asks Pebble to flush its memtables, as RocksDB's
// memtable_op_scan_flush_trigger does. It is rate-limited: at most one
// such flush per scanFlushInterval, and only after scanFlushMinBytes of
// new writes, because the skipped entries may also sit in tables (deleted
// rows that no compaction has reached yet), which a flush does not help.
const (
	scanFlushInterval = time.Second
	scanFlushMinBytes = 1 << 20
)

// noteScanWaste is called with a scan's iterator before it is closed.
func (s *Store) noteScanWaste(it *pebble.Iterator) {
	st := it.Stats()
	waste := st.ForwardStepCount[pebble.InternalIterCall] - st.ForwardStepCount[pebble.InterfaceCall]
	if waste <= 0 {
		return
	}
	s.metrics.scanSkipped.Add(float64(waste))
	if s.opts.ScanFlushTrigger <= 0 || waste < s.opts.ScanFlushTrigger {
		return
	}
	now := time.Now().UnixNano()
	last := s.scanFlush.last.Load()
	if now-last < int64(scanFlushInterval) || !s.scanFlush.last.CompareAndSwap(last, now) {
		return
	}
	go s.flushForScans()
}

// flushForScans starts a flush of the memtables if enough was written
// since the last one it started.
func (s *Store) flushForScans() {
	if s.acquire() != nil {
		return
	}
	defer s.release()
	written := s.db.Metrics().WAL.BytesIn
	if written-s.scanFlush.writtenAt.Load() < scanFlushMinBytes {
		return
	}
	if _, err := s.db.AsyncFlush(); err != nil {
		s.log.Warn("pebblestore: flush asked by a scan failed", "err", err)
		return
	}
	s.scanFlush.writtenAt.Store(written)
	s.metrics.scanFlushes.Inc()
	s.log.Debug("pebblestore: flushing memtables: a scan stepped over too many dead entries")
}
