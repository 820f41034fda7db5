package main

import (
	"github.com/nimbus-fs/nimbus/platform"
)

// An instance's address is no secret (the gateway's /status/cluster and
// `nimbus status --json` list it, and a hybrid client dials it when the
// instance cannot connect back), so an instance bounds the clients that
// reach it straight as a plain server does (docs/OPERATIONS.md, "The
// platform's ports: who may call an instance"): the gateway starts each
// with --max-connections from its caps, and the timeouts, RPC memory
// bounds and --tenant-limit of serve's command line.

// platformConns is what instanceMaxConnections keeps for the platform's
// own calls on an instance besides the invocations: its load polls, the
// status page's cache counters, the usage read before a stop.
const platformConns = 16

// instanceMaxConnections is each instance's --max-connections for
// --instance-max-connections flag: the flag when above 0, else what the
// gateway would let run and wait on one instance of a deployment alone,
// its --concurrency slots and the deployment's --max-queue, plus
// platformConns. A client that holds more connections to an instance is
// answered 503 with Retry-After, as by a plain server at its limit.
func instanceMaxConnections(flag int, cfg platform.Config) int {
	if flag > 0 {
		return flag
	}
	return cfg.Concurrency + cfg.MaxQueue + platformConns
}
