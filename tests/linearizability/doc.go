// Package linearizability records histories of concurrent clients on the
// real namespace engine — in process over the Pebble store, and through the
// Go client against the real `nimbus serve` binary — and checks them with
// porcupine against the sequential model in internal/linmodel.
//
// See docs/TESTING-LINEARIZABILITY.md for what is checked, the races
// the subtree protocol prevents, and how to replay a seed.
package linearizability
