package webhdfs

import (
	"encoding/json"
	"fmt"
	"io"
)

// The replies shared with the gateway are package wire's.

// defaultsReply is the part of GETSERVERDEFAULTS the client reads.
type defaultsReply struct {
	FsServerDefaults struct {
		BlockSize   int64  `json:"blockSize"`
		Replication uint16 `json:"replication"`
	} `json:"FsServerDefaults"`
}

func decodeJSON(r io.Reader, out any) error {
	if err := json.NewDecoder(r).Decode(out); err != nil {
		return fmt.Errorf("webhdfs: bad JSON reply: %w", err)
	}
	return nil
}
