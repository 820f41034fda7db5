package main

import (
	"flag"

	"github.com/nimbus-fs/nimbus/rpc"
	"github.com/nimbus-fs/nimbus/server"
)

// limitFlags maps the connection limits and timeouts (docs/OPERATIONS.md)
// onto l. The byte bounds are given in MiB; the returned func applies them
// after parsing.
func limitFlags(fl *flag.FlagSet, l *server.Limits) (apply func()) {
	fl.IntVar(&l.MaxConnections, "max-connections", l.MaxConnections, "client connections held at once, beyond which clients get 503 (default: the descriptor limit minus a reserve of max(1024, 25%) for the store)")
	fl.DurationVar(&l.ReadHeaderTimeout, "http-header-timeout", l.ReadHeaderTimeout, "time a client has to send a request's headers")
	fl.DurationVar(&l.IdleTimeout, "http-idle-timeout", l.IdleTimeout, "keep-alive HTTP connections idle this long are closed")
	fl.DurationVar(&l.WriteStallTimeout, "write-stall-timeout", l.WriteStallTimeout, "a connection whose client takes no response bytes for this long is closed")
	fl.DurationVar(&l.RPCFrameTimeout, "rpc-frame-timeout", rpc.DefaultFrameTimeout, "an RPC connection that leaves a frame unfinished this long is closed")
	fl.DurationVar(&l.RPCIdleTimeout, "rpc-idle-timeout", rpc.DefaultIdleTimeout, "an RPC connection silent this long between frames is closed")
	fl.DurationVar(&l.UploadIdleTimeout, "upload-idle-timeout", l.UploadIdleTimeout, "a WebHDFS upload whose client sends nothing for this long fails, and nothing of it is kept")
	connMB := fl.Int64("rpc-conn-max-mb", rpc.DefaultMaxConnBytes>>20, "MiB of unanswered requests and unsent answers one RPC connection may hold before the server stops reading it")
	serverMB := fl.Int64("rpc-server-max-mb", rpc.DefaultMaxServerBytes>>20, "the same across all RPC connections, in MiB")
	return func() {
		l.RPCConnBytes = *connMB << 20
		l.RPCServerBytes = *serverMB << 20
	}
}
