package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nimbus-fs/nimbus/datanode"
	"github.com/nimbus-fs/nimbus/server"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

// envZone names the environment variable that gives `nimbus datanode` its
// zone when --zone is not set.
const envZone = "NIMBUS_ZONE"

// cmdDatanode is `nimbus datanode --data DIR --store postgres://...`: one
// DataNode (package datanode) until SIGTERM or SIGINT. It prints
//
//	nimbus datanode ready id=ID uuid=UUID data=HOST:PORT http=HOST:PORT
//
// on its standard output once registered. Flags map onto datanode.Config.
func cmdDatanode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := datanode.DefaultConfig()
	fl := flag.NewFlagSet("nimbus datanode", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&cfg.Dir, "data", "", "storage directory of the DataNode's replicas (created if missing; required)")
	storeURL := fl.String("store", "", "metadata store the NameNodes share: postgres://USER@HOST:PORT/DB (required; libpq URL, password from PGPASSWORD or ~/.pgpass)")
	fl.StringVar(&cfg.Zone, "zone", os.Getenv(envZone), "availability zone of this DataNode (default $"+envZone+"); a block's replicas are spread over zones")
	fl.StringVar(&cfg.Host, "host", "", "host name published for this DataNode (default: the OS host name)")
	fl.StringVar(&cfg.DataAddr, "addr", cfg.DataAddr, "listen address of the data transfer port")
	fl.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "listen address of the HTTP port (/metrics, /healthz, the NameNodes' signed commands)")
	fl.IntVar(&cfg.Transfer.MaxConns, "max-transfers", cfg.Transfer.MaxConns, "most data connections served at once; one more is closed at once")
	fl.DurationVar(&cfg.Transfer.Timeout, "transfer-timeout", cfg.Transfer.Timeout, "a data connection whose peer is silent for this long (a read or write of it blocked) loses its op: a stalled pipeline fails")
	fl.DurationVar(&cfg.Transfer.KeepAlive, "transfer-keepalive", cfg.Transfer.KeepAlive, "how long a data connection waits for another op after a read")
	fl.BoolVar(&cfg.NoBlockTokens, "no-block-tokens", false, "serve data ops without checking block tokens (by default each op needs a token a NameNode issued under the cluster secret)")
	fl.Func("replication-bandwidth", "bytes per second of the replicas this DataNode copies to others when told to, all copies together, bytes or with suffix k/m/g (default 0: unbounded)", func(v string) (err error) {
		cfg.ReplicationBandwidth, err = parseSize(v)
		return err
	})
	fl.DurationVar(&cfg.Liveness.Heartbeat, "heartbeat", cfg.Liveness.Heartbeat, "heartbeat period")
	fl.DurationVar(&cfg.Liveness.StaleAfter, "stale-after", cfg.Liveness.StaleAfter, "without a heartbeat recorded for this long NameNodes take the DataNode for stale, and /healthz answers 503")
	fl.DurationVar(&cfg.Liveness.DeadAfter, "dead-after", cfg.Liveness.DeadAfter, "without a heartbeat recorded for this long NameNodes take the DataNode for dead; it sends a full block report once its heartbeats pass again")
	fl.DurationVar(&cfg.FullReportInterval, "block-report-interval", cfg.FullReportInterval, "period of full block reports (one is sent at start)")
	fl.DurationVar(&cfg.FullReportInitialDelay, "block-report-initial-delay", cfg.FullReportInitialDelay, "the first full block report waits a random delay below this (0: at once)")
	fl.Func("reserved", "free space kept for other uses of the volume, bytes or with suffix k/m/g/t (default 0); with less free the DataNode is full and takes no new replicas", func(v string) (err error) {
		cfg.Reserved, err = parseSize(v)
		return err
	})
	poolSize := fl.Int("pg-pool-size", 4, "most connections to the database")
	level := fl.String("log-level", "info", "log level: debug, info, warn, error")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: nimbus datanode --data DIR --store postgres://USER@HOST:PORT/DB [flags]\n\nRuns one DataNode: keeps block replicas in DIR and publishes itself and its replicas\nin the metadata store the NameNodes share. Stops on SIGTERM or SIGINT.\n\nenvironment: "+envZone+" (the zone, when --zone is not given)\n\nflags:")
		printFlags(fl, stderr)
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "nimbus datanode: "+format+"\n", a...)
		return 2
	}
	switch {
	case fl.NArg() > 0:
		return bad("unexpected arguments %q", fl.Args())
	case cfg.Dir == "":
		return bad("--data DIR is required")
	case *storeURL == "" || *storeURL == "pebble":
		return bad("--store postgres://... is required: a DataNode publishes itself in the metadata store every NameNode reads, and the embedded (pebble) store can be opened by one process only, the server's")
	case !strings.HasPrefix(*storeURL, "postgres://") && !strings.HasPrefix(*storeURL, "postgresql://"):
		return bad("bad --store %q: want postgres://USER@HOST:PORT/DB", server.RedactURL(*storeURL))
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return bad("bad --log-level %q", *level)
	}
	if err := cfg.Liveness.Validate(); err != nil {
		return bad("%v (--heartbeat, --stale-after, --dead-after)", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Logger, cfg.Registerer, cfg.Gatherer = log, reg, reg
	bi, _ := debug.ReadBuildInfo()
	cfg.Version = versionString(version, bi)
	if err := cfg.Validate(); err != nil {
		return bad("%v", err)
	}

	po := pgstore.DefaultOptions()
	po.PoolSize = *poolSize
	po.Logger = log.With("component", "store")
	po.Registerer = reg
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(openCtx, *storeURL, po)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus datanode: open store %s: %v\n", server.RedactURL(*storeURL), err)
		return 1
	}
	defer st.Close()
	dn, err := datanode.New(openCtx, cfg, st)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus datanode: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "nimbus datanode ready id=%d uuid=%s data=%s http=%s\n", dn.ID(), dn.UUID(), dn.DataAddr(), dn.HTTPAddr())
	if err := dn.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "nimbus datanode: %v\n", err)
		return 1
	}
	log.Info("DataNode stopped")
	return 0
}
