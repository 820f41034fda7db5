// Package blocktest is the conformance suite of the blocks seam: every
// blocks.Store implementation runs Run from its tests.
//
//	func TestConformance(t *testing.T) {
//		blocktest.Run(t, func(t *testing.T, dir string) blocks.Store {
//			st, err := local.Open(dir, local.DefaultConfig())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return st
//		})
//	}
//
// The opener may be called several times on one dir (after Close, or while
// a store is abandoned to simulate a crash) and must find the replicas
// there. The store must implement blocks.Corrupter.
package blocktest
