package rpc

import "google.golang.org/protobuf/encoding/protowire"

func consumeTag(b []byte) (protowire.Number, protowire.Type, int) { return protowire.ConsumeTag(b) }

func consumeValue(n protowire.Number, t protowire.Type, b []byte) int {
	return protowire.ConsumeFieldValue(n, t, b)
}
