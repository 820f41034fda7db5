// Package e2e holds end-to-end tests that build the real `nimbus` binary,
// start `nimbus serve` as a child process on a free loopback port, and drive
// it through the CLI and the Go client library — including killing it with
// SIGKILL and restarting it from the same directory.
package e2e
