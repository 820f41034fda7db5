// Package server is the composition root of `nimbus serve`: it opens the
// embedded store, starts one NameNode (the namespace engine) on it, and serves
// everything on one HTTP port — the RPC (/rpc/), WebHDFS (/webhdfs/v1/),
// Prometheus metrics (/metrics), readiness (/readyz) and a status page (/).
//
// Use: cfg := server.DefaultConfig(); cfg.DataDir = dir; s, err := server.New(cfg);
// err = s.Start(ctx); ...; err = s.Stop(ctx).
package server
