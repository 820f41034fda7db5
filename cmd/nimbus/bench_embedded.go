package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nimbus-fs/nimbus/server"
)

// startEmbedded starts a fresh Nimbus server in a temporary directory on an
// ephemeral loopback port and returns its address ("http://127.0.0.1:PORT")
// and the function that stops it and removes the directory.
func startEmbedded(ctx context.Context, stderr io.Writer, profile *benchProfile) (string, func(), error) {
	dir, err := os.MkdirTemp("", "nimbus-bench-")
	if err != nil {
		return "", nil, err
	}
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Listen = dir, "127.0.0.1:0"
	if profile != nil {
		profile.apply(&cfg)
	}
	srv, err := server.New(cfg)
	if err == nil {
		if err = srv.Start(ctx); err != nil {
			_ = srv.Stop(context.Background())
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Stop(sctx); err != nil {
			fmt.Fprintln(stderr, "nimbus bench: stopping the embedded server:", err)
		}
		os.RemoveAll(dir)
	}
	return srv.Addr(), stop, nil
}
