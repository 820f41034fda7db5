// Package metatest holds test support for code written against
// meta.FileSystem: MemFS, an in-memory file system for unit tests of the RPC
// layer, the client, the WebHDFS gateway and the benchmark driver, where the
// real engine (package namespace) would be slower to set up or harder to make
// block or fail on cue.
//
// MemFS follows the contract where tests rely on it — the error kinds, leases
// on Create, Append, Write and Complete, sequential writes and a size limit,
// listing order and paging with Remaining, HDFS's rename into an existing
// directory, ACLs and xattrs — and passes the behaviour suite (meta/fstest)
// that the engine passes too, so that the two cannot drift apart. It is
// not a reference for HDFS semantics (package namespace is): it checks no
// permissions except on the superuser-only calls and the ACL and xattr
// rules, enforces no quotas, and is not durable.
//
//	fs := metatest.NewMemFS()
//	fs.Hook = func(ctx context.Context, method string) error { ... } // block or fail calls
package metatest
