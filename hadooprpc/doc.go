// Package hadooprpc serves Hadoop's IPC protocol and the metadata methods
// of its ClientNamenodeProtocol over a meta.FileSystem, so that unmodified
// hdfs:// clients (Hadoop's DistributedFileSystem, `hadoop fs`) use a Nimbus
// NameNode as they would an HDFS one (docs/HDFS-RPC.md).
//
// A connection starts with the 7-byte header ("hrpc", IPC version 9, the
// service class, the auth protocol: NONE, or SASL, whose NEGOTIATE is
// answered SUCCESS as Hadoop's server answers it with security off). Then
// come frames: a 4-byte big-endian length and varint-delimited protobuf
// messages. The first call is the connection context (callId -3), which
// names the user every later call runs as; pings (callId -4) are not
// answered. A call carries RpcRequestHeaderProto, RequestHeaderProto (method
// and protocol) and the request message; its answer carries
// RpcResponseHeaderProto and, on success, the response message, or on
// failure the Java exception's class name and message. Calls of one
// connection run concurrently, bounded per connection and per server, and
// are answered as they finish, in any order, as Hadoop's client allows.
//
// A call's clientId and callId name its meta.Request (client "hrpc-<hex
// clientId>", id callId+1, resubmitted when retryCount > 0): a file system
// that keeps records of applied writes (package namespace) answers a
// retried write from the record, as HDFS's retry cache does.
package hadooprpc
