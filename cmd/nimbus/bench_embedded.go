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
// Placeholder until package server builds. The intended body, against the
// announced API:
//
//	dir, err := os.MkdirTemp("", "nimbus-bench-")
//	if err != nil {
//		return "", nil, err
//	}
//	cfg := server.DefaultConfig()
//	cfg.DataDir, cfg.Listen = dir, "127.0.0.1:0"
//	srv, err := server.New(cfg)
//	if err == nil {
//		err = srv.Start(ctx)
//	}
//	if err != nil {
//		os.RemoveAll(dir)
//		return "", nil, err
//	}
//	stop := func() {
//		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
//		defer cancel()
//		if err := srv.Stop(sctx); err != nil {
//			fmt.Fprintln(stderr, "nimbus bench: stopping the embedded server:", err)
//		}
//		os.RemoveAll(dir)
//	}
//	return srv.Addr(), stop, nil
func startEmbedded(_ context.Context, _ io.Writer) (string, func(), error) {
	return "", nil, errors.New("the embedded target needs package server, which is not built yet; use --target nimbus://HOST:PORT or webhdfs://HOST:PORT")
}
