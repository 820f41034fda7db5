// Package rpc carries the meta.FileSystem contract over the network: framing,
// the multiplexed connection protocol, the HTTP invocation path and the
// conversion between wire messages (package api) and meta types.
//
// # Protocol
//
// Everything runs on one HTTP port. A client opens a TCP connection and sends
//
//	GET /rpc/conn HTTP/1.1
//	Connection: Upgrade
//	Upgrade: nimbus-rpc/2
//
// The server answers 101 Switching Protocols and from then on both sides
// exchange frames: a uvarint byte length followed by that many bytes of a
// protobuf message (api.Request from client to server, api.Response back).
// A connection is multiplexed and pipelined: a client may send many requests
// without waiting, the server runs each in its own goroutine (bounded by
// ServerOptions.MaxInflight across the server) and answers in completion
// order; responses are matched to requests by request_id. A frame above the
// maximum size, or one that does not decode, is a protocol error: the server
// answers with an Error whose request_id is 0 and closes the connection.
//
// The server hands every method that is not read-only the request's client
// name, request id and resubmitted flag in its context (meta.WithRequest),
// so that a file system that records the writes it applied (the namespace
// engine) answers a resubmission from its record instead of applying it
// again: exactly once, with no wire type in the engine.
//
// A connection holds bounded resources (ServerOptions): the bytes of the
// requests it has read and not answered plus the answers not yet written
// (MaxConnBytes, and MaxServerBytes across connections) and the number of
// such requests (MaxConnQueued). Over a bound the server stops reading the
// connection's next request until the client takes answers; requests already
// read are still answered. A frame must arrive whole within FrameTimeout of
// its first byte, and a connection may be silent between frames for at most
// IdleTimeout; either ends the connection.
//
// POST /rpc/call carries one request frame in its body and answers one
// response frame: the invocation path a platform gateway can route and scale.
// Its answer names the instance (HeaderInstance: id and base URL). An
// invocation that names its client's callback endpoint (HeaderCallback,
// HeaderCallbackToken) makes the server connect back to it in the
// background, once per endpoint while the connection lives: it sends a
// hello line (Hello, ParseHello) and, once accepted, serves frames on the
// connection as on an upgraded one (docs/ELASTIC.md, "Hybrid RPC and
// resilient clients"). Invoke is the client side of the path with headers.
//
// # Using it
//
// A server is NewServer(fs, opts) mounted with mux.Handle("/rpc/", s.Handler()).
// Clients use Dial to get a *Conn and Conn.Call to exchange one request and
// response, or CallHTTP for the HTTP path; package client builds the public
// library on top of these. Conversion helpers (StatusToProto, ErrorFromProto,
// ...) are the only place where api and meta types meet.
package rpc
