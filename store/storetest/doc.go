// Package storetest is the conformance suite of the store seam: every
// store.Store implementation runs it from its own tests,
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, dir string) store.Store {
//			st, err := pebblestore.Open(dir, pebblestore.DefaultOptions())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return st
//		})
//	}
//
// open must return a store persisted in dir (the suite picks dirs with
// t.TempDir and opens the same dir again after Close to test persistence; a
// server-backed implementation may map dir to a fresh database or schema).
// The suite closes every store it opens. Run it with -race: the bank test
// and the snapshot tests are concurrent.
//
// What it checks is the contract written on store.Store and store.Txn: round
// trips, reads of committed data only, atomic and durable commits, scans in
// key order from one snapshot, shared/exclusive locks held to the end,
// NoWait, cancellation, finished-transaction errors, id allocation, and a
// bank-transfer invariant under concurrency.
package storetest
