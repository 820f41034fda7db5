// Package benchtest holds test doubles for the benchmark driver: FakeNameNode,
// a WebHDFS NameNode in the manner of HDFS (redirects to a "DataNode", false
// for a failed rename or delete) over a metatest.MemFS, and the fakeserver
// command, which serves a metatest.MemFS over the RPC and Nimbus's gateway.
// The in-memory file system itself is meta/metatest's.
package benchtest
