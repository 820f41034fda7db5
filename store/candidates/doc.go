// Package candidates holds only benchmarks: the measurement behind the
// choice of the embedded store engine (docs/STORE.md). It runs the
// namespace's real access pattern against Pebble, bbolt and SQLite
// (modernc.org/sqlite, pure Go):
//
//   - read7: one batched read of the 7 inode rows of a depth-7 path;
//   - write3: one durable transaction writing 3 inode rows (a create: the
//     new inode, its parent's counters, one more row), synced to disk;
//
// each from 1 and 32 goroutines. Run:
//
//	go test -run '^$' -bench . -benchtime=1s -count=1 ./store/candidates
package candidates
