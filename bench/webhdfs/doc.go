// Package webhdfs is a small WebHDFS REST client that implements
// bench.Target, so that the benchmark driver measures any WebHDFS server
// (HDFS's NameNode, Nimbus's gateway) with the same workload code it runs
// over Nimbus's RPC.
//
// It speaks the protocol as Hadoop documents it: simple authentication with
// user.name, CREATE and APPEND in two steps (the NameNode answers 307 with a
// DataNode Location, the data goes there), OPEN following its redirect, and
// RemoteException bodies mapped to meta's error kinds (errors.go, over the
// class table in webhdfs/wire, which the gateway shares). One
// http.Transport holds the keep-alive connections for the NameNode and the
// DataNodes, sized to the number of benchmark clients.
//
//	c, err := webhdfs.New(webhdfs.Config{Addr: "http://127.0.0.1:9871", User: "alice", Conns: 64})
//	st, err := c.Stat(ctx, meta.User{Name: "alice"}, "/bench")
//
// Operations WebHDFS lacks (leases, RenewLease) are no-ops; every method of
// meta.FileSystem otherwise maps to one REST operation.
package webhdfs
