package main

import (
	"context"
	"errors"
	"io"
)

// startEmbedded starts a fresh Nimbus server in a temporary directory on an
// ephemeral loopback port and returns its address ("http://127.0.0.1:PORT")
// and the function that stops it and removes the directory.
//
// Placeholder until package server builds.
func startEmbedded(_ context.Context, _ io.Writer) (string, func(), error) {
	return "", nil, errors.New("the embedded target needs package server, which is not built yet; use --target")
}
