// Command devserver serves the WebHDFS gateway over the real namespace engine
// on a Pebble store, for the Python client tests (tests/python) until
// `nimbus serve` mounts the gateway. It is a development tool, not the server:
// no RPC, no status page beyond /metrics and /readyz.
//
//	go run ./webhdfs/internal/devserver -listen 127.0.0.1:9870 -data /tmp/nimbus-dev
//
// With -mem it serves an in-memory file system instead (webhdfs/internal/memfs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	"github.com/nimbus-fs/nimbus/webhdfs"
	"github.com/nimbus-fs/nimbus/webhdfs/internal/memfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:9870", "address to listen on (port 0: any free port)")
	data := flag.String("data", "", "store directory (default: a temporary directory removed on exit)")
	mem := flag.Bool("mem", false, "serve an in-memory file system instead of the engine")
	superuser := flag.String("superuser", "root", "the superuser (may use doas)")
	inline := flag.Int64("inline", 128<<10, "largest file the engine stores (inline threshold)")
	advertise := flag.String("advertise", "", "address put in redirects (default: the request's Host)")
	portFile := flag.String("port-file", "", "write the bound host:port to this file once serving")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	var fs meta.FileSystem
	if *mem {
		mc := memfs.DefaultConfig()
		mc.Superuser, mc.MaxFile = *superuser, *inline
		fs = memfs.New(mc)
	} else {
		dir := *data
		if dir == "" {
			tmp, err := os.MkdirTemp("", "nimbus-devserver-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
		st, err := pebblestore.Open(dir, pebblestore.DefaultOptions())
		if err != nil {
			return err
		}
		defer st.Close()
		cfg := namespace.DefaultConfig()
		cfg.Superuser, cfg.InlineThreshold, cfg.Logger, cfg.Registerer = *superuser, *inline, log, reg
		eng, err := namespace.New(st, cfg)
		if err != nil {
			return err
		}
		defer eng.Close()
		// A development server: let every user write at the top, as the
		// tests write as themselves.
		if err := eng.SetPermission(context.Background(), meta.User{Name: *superuser}, "/", 0o777); err != nil {
			return err
		}
		fs = eng
	}

	wcfg := webhdfs.DefaultConfig()
	wcfg.Superuser, wcfg.Advertise, wcfg.Logger, wcfg.Registerer = *superuser, *advertise, log, reg
	h, err := webhdfs.New(fs, wcfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(webhdfs.PathPrefix+"/", h)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if *portFile != "" {
		if err := os.WriteFile(*portFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			return err
		}
	}
	log.Info("devserver: serving WebHDFS", "addr", ln.Addr().String(), "mem", *mem)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
