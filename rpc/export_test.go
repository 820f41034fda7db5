package rpc

import "google.golang.org/protobuf/encoding/protowire"

func consumeTag(b []byte) (protowire.Number, protowire.Type, int) { return protowire.ConsumeTag(b) }

func consumeValue(n protowire.Number, t protowire.Type, b []byte) int {
	return protowire.ConsumeFieldValue(n, t, b)
}

// HeldBytes and HeldPeak expose the server's accounting (budget) to tests.
func (s *Server) HeldBytes() int64 { return s.held.Load() }
func (s *Server) HeldPeak() int64  { return s.heldPeak.Load() }

// MaxRefusedCallbacks is how many refused callback endpoints a server
// remembers.
const MaxRefusedCallbacks = maxRefused
