// Package client is the public Go library of Nimbus: a meta.FileSystem that
// talks to a Nimbus server over the multiplexed RPC (package rpc).
//
//	c, err := client.Dial(ctx, client.AddrFromEnv(), client.Options{})
//	if err != nil { ... }
//	defer c.Close()
//	u := client.DefaultUser()
//	err = c.Mkdirs(ctx, u, "/data", meta.DefaultDir)
//	err = c.WriteFile(ctx, u, "/data/hello", []byte("hi"), meta.CreateOptions{})
//	st, err := c.Stat(ctx, u, "/data/hello")
//
// A Client keeps a small pool of TCP connections (Options.Conns) and spreads
// requests over them; each connection carries many requests at once. A
// request takes an idle connection when there is one, and under load shares
// the busiest few, whose writes and reads then carry many frames each. It is
// safe for concurrent use by any number of goroutines.
//
// Errors are *meta.OpError values wrapping the sentinel of their kind, so
// errors.Is(err, meta.ErrNotFound) works as it does in process. When a
// connection breaks, the client reconnects on the next call. A call in
// flight on the broken connection is resubmitted on another connection, up
// to twice (Options.Resubmits), with its request id unchanged: a read is safe to run again, and
// a write is answered by the server from its record of the first
// submission if that one was applied (the server keeps the record for a few
// minutes; exactly once, docs/RPC.md). A call that gets no answer even so
// fails with meta.ErrOutcomeUnknown when it is a write (it may or may not
// have happened: look before running it again, or send it again with the
// same id) and with meta.ErrBusy when it is a read or was never sent (not
// done: safe to run again).
//
// With Options.Hybrid the address is a platform gateway: a request to a
// deployment travels as an HTTP invocation until the instance that served
// it has connected back to the process's callback endpoint, then over that
// connection (a share Options.HTTPShare still over HTTP); an instance that
// does not connect back is dialled directly. Busy invocations are retried
// with exponential backoff and full jitter, requests lost with a connection
// or an instance are resubmitted, and a latency spike makes the client
// prefer existing connections (HybridStats counts each;
// docs/ELASTIC.md, "Hybrid RPC and resilient clients").
//
// Streaming helpers (CreateWriter, AppendWriter, OpenReader, ReadFile,
// WriteFile, Walk) move file contents and walk trees in constant memory.
package client
