// Package store defines the seam between the namespace engine and the
// persistent metadata store: the Store and Txn interfaces (store.go), the key
// schema (keys.go) and the row encodings (inode.go).
//
// Implementations live in sub-packages (pebblestore: the embedded default) and
// all pass the conformance suite in storetest.
package store
