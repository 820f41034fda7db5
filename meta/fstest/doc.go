// Package fstest is the behaviour suite of meta.FileSystem: the namespace
// semantics a user of any implementation relies on, run against each of
// them by its own package's tests.
//
//	func TestFileSystem(t *testing.T) {
//		fstest.Run(t, fstest.Config{Superuser: "root", Caps: fstest.AllCaps()},
//			func(t *testing.T) meta.FileSystem { return openEngine(t) })
//	}
//
// Every case gets a fresh, empty file system from the Opener, and fails
// with the step's name and the error it got. Errors must be *meta.OpError
// values of the expected kind, naming an operation and a path.
//
// Implementations differ only where the protocol they speak or the purpose
// they serve cannot express something: Caps says what the implementation
// offers, and a case (or the part of one) that needs a capability the
// implementation lacks is not run. A capability is declared by the binding
// for a reason it states, never to hide a failure.
//
// The bindings: the in-memory MemFS (meta/metatest), the engine on Pebble
// and on PostgreSQL (namespace), the Go client over the RPC to a server
// (client), the client through the local platform (platform/local), and
// the WebHDFS client through the gateway (bench/webhdfs).
package fstest
