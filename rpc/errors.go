package rpc

import "errors"

// Sentinel errors of the transport. The client library maps them onto meta
// kinds; they never travel on the wire.
var (
	// ErrFrameTooLarge: a frame's length prefix exceeds the maximum size.
	ErrFrameTooLarge = errors.New("rpc: frame too large")
	// ErrProtocol: the peer sent something that is not the protocol (a bad
	// handshake, an undecodable frame).
	ErrProtocol = errors.New("rpc: protocol error")
	// ErrConnClosed: the connection was closed before the request was handed
	// to it; the request was never sent and may be retried safely.
	ErrConnClosed = errors.New("rpc: connection closed")
	// ErrConnBroken: the connection failed while the request was in flight;
	// the server may or may not have executed it.
	ErrConnBroken = errors.New("rpc: connection broken with the request in flight")
	// ErrGateway: Dial reached a platform gateway (its ConnPath answer
	// carries HeaderGateway), which serves invocations (CallPath) and no
	// multiplexed connection; a client talks to it as a hybrid client.
	ErrGateway = errors.New("rpc: the address is a platform gateway, which serves no multiplexed connection")
)
