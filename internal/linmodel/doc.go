// Package linmodel is a sequential specification of the Nimbus namespace, for
// checking recorded histories of concurrent clients for linearizability with
// porcupine (github.com/anishathalye/porcupine).
//
// It covers the operations whose interplay the subtree protocol is
// about: mkdirs, create, stat, list, rename, chmod, recursive delete and
// set-quota, with owners, modes, namespace quotas and the engine's order of
// checks (the first failing check decides the error kind). Results are
// compared by error kind, and for stat and list by type, mode, owner, entry
// count and quota, never by times or inode ids.
//
// Spec is the model as a pure function; Model wraps it for porcupine; Run
// executes an Input on any meta.FileSystem (the engine in process, or the
// client against `nimbus serve`) and returns the Output to record; Gen makes
// seeded random inputs over a small namespace, so that operations collide.
//
// A State is immutable: Spec returns a new one when an operation changes the
// tree, and states compare by a canonical string, so porcupine can cache and
// compare them cheaply.
package linmodel
