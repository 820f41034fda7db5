// Package meta holds the namespace contract shared by every part of Nimbus: the
// FileSystem interface, FileStatus and the other result types, the error kinds
// and path rules. The engine implements the contract, the RPC carries it, and
// the client, CLI, WebHDFS gateway and benchmarks are written against it.
//
// It depends on nothing else in Nimbus, so that any package may import it.
package meta
