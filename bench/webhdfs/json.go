package webhdfs

import (
	"fmt"

	// goccy/go-json decodes the replies several times faster than
	// encoding/json: the driver's own CPU, on the same 2 cores as the
	// server, must not be what a WebHDFS listing benchmark measures.
	json "github.com/goccy/go-json"
)

// The replies shared with the gateway are package wire's.

// defaultsReply is the part of GETSERVERDEFAULTS the client reads.
type defaultsReply struct {
	FsServerDefaults struct {
		BlockSize   int64  `json:"blockSize"`
		Replication uint16 `json:"replication"`
	} `json:"FsServerDefaults"`
}

func decodeJSON(b []byte, out any) error {
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("webhdfs: bad JSON reply: %w", err)
	}
	return nil
}
