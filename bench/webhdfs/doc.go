// Package webhdfs is a small WebHDFS REST client that implements
// bench.Target, so that the benchmark driver measures any WebHDFS server
// (HDFS's NameNode, Nimbus's gateway) with the same workload code it runs
// over Nimbus's RPC.
//
// It speaks the protocol as Hadoop documents it: simple authentication with
// user.name, CREATE and APPEND in two steps (the NameNode answers 307 with a
// DataNode Location, the data goes there), OPEN following its redirect, and
// RemoteException bodies mapped to meta's error kinds (errors.go, over the
// class table in webhdfs/wire, which the gateway shares). One fasthttp
// client holds the keep-alive connections for the NameNode and the
// DataNodes, one per benchmark client and host.
//
// Why fasthttp: the driver runs on the same cores as the server it
// measures, so its cost per request is taken from the server's. Against
// Nimbus's gateway, one client doing GETFILESTATUS in a loop spent 95-106 µs
// of driver CPU per request with net/http and 45-47 µs with fasthttp, and
// did 5,700-6,100/s against 9,300-9,600/s; at 16 clients 23-25 against
// 16-17 µs (a throwaway program, 2 alternating rounds of 3 s). With `nimbus
// bench micro` after the switch: WebHDFS stat at one client 5,542 and 5,572/s
// → 8,068 and 7,384/s, chmod at 16 clients 12,477 and 11,320/s → 14,650 and
// 14,575/s. Replies are decoded with goccy/go-json for the same reason.
//
//	c, err := webhdfs.New(webhdfs.Config{Addr: "http://127.0.0.1:9871", User: "alice", Conns: 64})
//	st, err := c.Stat(ctx, meta.User{Name: "alice"}, "/bench")
//
// Operations WebHDFS lacks (leases, RenewLease) are no-ops; every method of
// meta.FileSystem otherwise maps to one REST operation.
package webhdfs
