package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/tenant"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/coherence/loop"
	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/datapath/maintain"
	"github.com/nimbus-fs/nimbus/hadooprpc"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/internal/gctune"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/rpc"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	"github.com/nimbus-fs/nimbus/store/pgstore"
	"github.com/nimbus-fs/nimbus/webhdfs"
)

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// DataDir holds the store (DataDir/meta). Created if missing.
	DataDir string
	// Listen is the HTTP address; port 0 picks a free port (see Addr).
	Listen string
	// Advertise is the base URL clients are sent to in WebHDFS redirects;
	// empty means the address each request came to.
	Advertise string
	// Namespace configures the engine; Logger and Registerer are filled in.
	Namespace namespace.Config
	// Store configures the embedded store; Logger and Registerer are filled in.
	Store pebblestore.Options
	// StoreURL chooses the metadata store: "" or "pebble" for the embedded
	// store in DataDir/meta, or a PostgreSQL URL (postgres://USER@HOST:PORT/DB
	// or postgresql://...) for a database that several servers may share.
	// Blocks stay in DataDir either way.
	StoreURL string
	// BlockStorage chooses where the bytes of files beyond the inline
	// threshold live: "" or BlockStorageLocal in DataDir/blocks, written
	// by this server; BlockStorageDataNodes on the DataNodes registered in
	// the store (`nimbus datanode`), written by the clients themselves
	// (blockstorage.go). The DataNodes need a store they share with the
	// server: PostgreSQL.
	BlockStorage string
	// DataNodeLiveness judges the DataNodes live, stale or dead (for the
	// DataNode mode's placement and for the status views); it must match the DataNodes' own (`nimbus datanode
	// --heartbeat --stale-after --dead-after`). Heartbeat 0: registry.DefaultConfig.
	DataNodeLiveness registry.Config
	// Maintenance bounds the replication duty of the DataNode mode
	// (datapath/maintain), which the leader of MaintenanceElection runs
	// (duties.go). Zero fields take maintain.DefaultConfig's.
	Maintenance MaintenanceConfig
	// Postgres configures the PostgreSQL store (used when StoreURL is a
	// PostgreSQL URL); Logger and Registerer are filled in.
	Postgres pgstore.Options
	// DebugAddr, when set, is a second HTTP address serving Go's profiler
	// (/debug/pprof/). Empty (the default): no profiler anywhere. It is
	// never on Listen: profiles show the server's internals and a CPU
	// profile costs CPU, so only an operator who opens the port gets them.
	DebugAddr string
	// HadoopRPCAddr, when set, is the address of the Hadoop IPC listener
	// serving ClientNamenodeProtocol (package hadooprpc), for hdfs://
	// clients; HDFS's NameNode port is 8020. Empty (DefaultConfig):
	// none.
	HadoopRPCAddr string
	// Logger may be nil (discard).
	Logger *slog.Logger
	// FailStopTimeout bounds the stop after the store failed, or after the
	// stop's own deadline passed (failstop.go): requests stuck on the store
	// are abandoned after it.
	FailStopTimeout time.Duration
	// Limits bound connections, their timeouts and RPC memory (limits.go).
	Limits Limits
	// Coordinator chooses the membership service the server registers
	// with (coordinator.go): "" or "inprocess" (the default: in this
	// process), or etcd://HOST:PORT[,HOST:PORT...][/PREFIX] for etcd
	// servers that several servers share. Start fails when etcd cannot be
	// reached.
	Coordinator string
	// CoordinatorTTL is the lease TTL with etcd, whole seconds; 0 means
	// etcdcoord's default (10 s).
	CoordinatorTTL time.Duration
	// OrphanBlockGrace is how long, on a shared store, a block replica
	// with no row must stay without one before it is removed as an orphan
	// (duties.go): longer than any transaction that records a block can
	// stay pending. On the embedded store orphans go before serving, at
	// once.
	OrphanBlockGrace time.Duration
	// SubtreeHeapMargin bounds the Go heap's growth while a subtree
	// operation works (a recursive delete, chmod or chown -R): the soft
	// memory limit is lowered meanwhile to what the runtime holds when the
	// work starts plus this (internal/gctune.HoldHeap). 0: no bound.
	SubtreeHeapMargin int64
	// Tenants configures the per-tenant accounting of requests (RPC and
	// WebHDFS): how many tenants are named, and each limited tenant's
	// requests per second (`--tenant-top`, `--tenant-limit`). Registerer and
	// Now are filled in.
	Tenants tenant.Config
	// Prices turn this instance's metered activity into dollars
	// (`--price-gb-second`, `--price-million-invocations`,
	// `--instance-memory-gb`; GET /status/instance).
	Prices platform.Prices
	// CacheBytes is the byte budget of the NameNode's metadata cache
	// (package cache; docs/ELASTIC.md, "Metadata cache"): stats and
	// listings of cached paths take no store round trip. 0 (the default):
	// no cache. On PostgreSQL with an etcd coordinator the caches of all
	// servers on the database are kept coherent by the coherence loop
	// (coherence.go), which every server there runs, with a cache or
	// without: one without invalidates the others' caches when it writes;
	// on PostgreSQL with the in-process coordinator a
	// cache is coherent only while this server is alone on the database.
	CacheBytes int64
	// Deployment and Deployments (`--deployment`, `--deployments`): this
	// server is an instance of deployment Deployment of the Deployments
	// that share the namespace (0 and 1 by default: one). It joins the
	// coordinator as a member of its deployment, and its cache fills only
	// the entries its deployment owns besides directory rows, so that a
	// write invalidates a file's row, a listing or hot attributes only at
	// the owner's instances (docs/ELASTIC.md, "Deployments own cache
	// entries"). Every server on one store must have the same Deployments:
	// the first records it in the store, and New refuses another.
	Deployment, Deployments int
	// CacheDisableFillOwnership fills every entry whatever deployment owns
	// it, while invalidations still go only to the owner: for the test that
	// shows the ownership rule is needed, never in production.
	CacheDisableFillOwnership bool
	// CoherenceDisableInvalidation keeps the coherence loop's fence and
	// floor but sends no INV to peers: for the tests that show the
	// invalidations between servers are needed, never in production.
	CoherenceDisableInvalidation bool
	// PlatformInstance says a platform started this server as one of its
	// instances (`nimbus namenode`, InProcessHost): its meter then counts
	// as invocations only the requests that arrived over HTTP (POST
	// /rpc/call, WebHDFS), those on connections (/rpc/conn, TCP
	// connect-backs) as active time only. A plain server (false) counts
	// every request as an invocation (docs/ELASTIC.md, "What an instance
	// costs").
	PlatformInstance bool
	// Version is shown on the status page.
	Version string
}

// DefaultConfig serves ./nimbus-data on 127.0.0.1:9870.
func DefaultConfig() Config {
	return Config{
		DataDir:   "nimbus-data",
		Listen:    "127.0.0.1:9870",
		Namespace: namespace.DefaultConfig(),
		Store:     pebblestore.DefaultOptions(),
		Postgres:  pgstore.DefaultOptions(),

		FailStopTimeout:   5 * time.Second,
		SubtreeHeapMargin: 32 << 20,
		Limits:            DefaultLimits(),
		OrphanBlockGrace:  time.Minute,
		Prices:            platform.DefaultPrices(),
		Deployments:       1,
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("server: DataDir is empty")
	}
	if c.Listen == "" {
		return errors.New("server: Listen is empty")
	}
	if c.OrphanBlockGrace < 0 {
		return fmt.Errorf("server: OrphanBlockGrace = %v, want >= 0", c.OrphanBlockGrace)
	}
	if c.SubtreeHeapMargin < 0 {
		return fmt.Errorf("server: SubtreeHeapMargin = %d, want >= 0", c.SubtreeHeapMargin)
	}
	if c.CacheBytes != 0 && c.CacheBytes < cache.EntryOverhead {
		return fmt.Errorf("server: CacheBytes = %d, want 0 (no cache) or at least %d", c.CacheBytes, cache.EntryOverhead)
	}
	if c.Deployments < 0 || c.Deployment < 0 || c.Deployment >= max(c.Deployments, 1) {
		return fmt.Errorf("server: Deployment %d of Deployments %d, want 0 <= Deployment < Deployments (0 is taken as 1)", c.Deployment, c.Deployments)
	}
	if c.FailStopTimeout <= 0 {
		return fmt.Errorf("server: FailStopTimeout = %v, want > 0", c.FailStopTimeout)
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if err := c.Namespace.Validate(); err != nil {
		return err
	}
	if err := c.ValidateCoordinator(); err != nil {
		return err
	}
	if c.UsesPostgres() {
		return c.Postgres.Validate()
	}
	if c.StoreURL != "" && c.StoreURL != "pebble" {
		return fmt.Errorf("server: store %q: want pebble or a postgres:// URL", RedactURL(c.StoreURL))
	}
	return c.Store.Validate()
}

// UsesPostgres reports whether StoreURL names a PostgreSQL database.
func (c *Config) UsesPostgres() bool {
	return strings.HasPrefix(c.StoreURL, "postgres://") || strings.HasPrefix(c.StoreURL, "postgresql://")
}

// RedactURL returns a connection URL without its password, for logs and
// errors.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if err != nil {
			return "(unparsable URL)"
		}
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// BlocksDir is where a server with data directory dataDir keeps its block
// replicas.
func BlocksDir(dataDir string) string { return filepath.Join(dataDir, "blocks") }

// StoreDir is where a server with data directory dataDir keeps its metadata
// store (what `nimbus fsck --data` opens).
func StoreDir(dataDir string) string { return filepath.Join(dataDir, "meta") }

// Server is one embedded Nimbus: store, NameNode and HTTP endpoint.
type Server struct {
	cfg     Config
	tenants *tenant.Tracker // who loads the server (tenant.go)
	meter   *platform.Meter // what a serverless platform would bill it
	page    *statusPager    // the status page's samples (statuspage.go)
	log     *slog.Logger
	reg     *prometheus.Registry
	store   store.Store
	pebble  *pebblestore.Store // the embedded store, nil on PostgreSQL
	blocks  *local.Store
	dnodes  *dataNodeView // the store's DataNodes (datanodes.go)
	// maintainer is the replication duty of the DataNode mode
	// (blockstorage.go); nil in the local mode.
	maintainer *maintain.Maintainer
	ns         *namespace.Engine
	coord      coordinator.Coordinator // from Start; nil before
	// opening is the coordinator being opened by New in the background,
	// while the store opens (both are round trips to other servers, and
	// an instance's cold start waits for the two): Start takes it.
	opening struct {
		done  chan struct{}
		coord coordinator.Coordinator
		err   error
	}
	member *membership // this server's session, from Start
	// auth is the cluster secret's key (New): member requests this server
	// sends are signed with it, and those it receives checked.
	auth *clusterauth.Key
	// coherence keeps the caches of the servers on a shared store
	// coherent (coherence.go), this server's own cache or none; nil on a
	// store of its own or without a shared coordinator.
	coherence *loop.Loop
	duties    struct { // duties.go, from Start
		cancel context.CancelFunc
		wg     sync.WaitGroup
		// maintaining: this server runs the replication duty.
		maintaining atomic.Bool
	}
	rpc    *rpc.Server
	web    *webhdfs.Handler
	hrpc   *hadooprpc.Server // nil unless Config.HadoopRPCAddr
	hrpcL  net.Listener
	hrpcWG sync.WaitGroup
	http   *http.Server
	ln     net.Listener
	debug  *http.Server // nil unless Config.DebugAddr
	debugL net.Listener
	ready  atomic.Bool
	start  time.Time

	serveErr chan error
	stopOnce sync.Once
	stopErr  error
	// shutDown is set once shutdown has run to its end (the coherence loop,
	// store and coordinator closed), not when Stop gave up on it.
	shutDown atomic.Bool
	fatal    fatal // failstop.go

	// startup is how long each step of New and Start took, logged with
	// "nimbus serving": what a cold start of an instance spends its time
	// on (docs/ELASTIC.md, "The local platform and its hosting").
	startup     []any
	startupMark time.Time
}

// phase records the time since the previous phase under name.
func (s *Server) phase(name string) {
	now := time.Now()
	s.startup = append(s.startup, name+"_ms", float64(now.Sub(s.startupMark).Microseconds())/1e3)
	s.startupMark = now
}

// New opens the store and the namespace. It does not listen yet.
func New(cfg Config) (*Server, error) { return NewContext(context.Background(), cfg) }

// NewContext is New, giving up on opening the store when ctx ends (a
// SIGTERM while the store replays its log on a slow or full disk).
func NewContext(ctx context.Context, cfg Config) (_ *Server, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, reg: prometheus.NewRegistry(), serveErr: make(chan error, 1), fatal: newFatal(), startupMark: time.Now()}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	tcfg := cfg.Tenants
	tcfg.Registerer = s.reg
	tn, err := tenant.New(tcfg)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.tenants = tn
	s.page = newStatusPager(time.Now()) // the start of this instance's cold start
	if err := cfg.Prices.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.meter, err = platform.NewMeter(nil, s.reg); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.meter.SetConnInvocations(!cfg.PlatformInstance)

	s.phase("metrics")
	s.opening.done = make(chan struct{})
	go func() {
		defer close(s.opening.done)
		s.opening.coord, s.opening.err = s.openCoordinator(context.Background())
	}()
	defer func() {
		if err != nil { // nobody will Start or Stop this server
			s.closeOpening()
		}
	}()
	st, err := s.openStore(ctx)
	if err != nil {
		return nil, err
	}
	s.phase("store")
	if err := checkDeployments(context.Background(), st, max(cfg.Deployments, 1)); err != nil {
		st.Close()
		return nil, err
	}
	if err := checkRequestTTL(context.Background(), st, cfg.Namespace.RequestTTL); err != nil {
		st.Close()
		return nil, err
	}
	s.phase("deployments")
	// The cluster secret: what the servers on this store sign and check
	// their traffic to each other with (coherence messages), made by the
	// first server on the store (internal/clusterauth).
	if s.auth, err = clusterauth.Load(context.Background(), st, nil); err != nil {
		st.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	s.phase("secret")
	if s.dnodes, err = newDataNodeView(st, cfg.dataNodeLiveness(), s.reg, s.log); err != nil {
		st.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	nc := cfg.Namespace
	if err := s.openBlocks(cfg, st, &nc); err != nil {
		st.Close()
		return nil, err
	}
	s.phase("blocks")
	nc.Logger = s.log
	nc.Registerer = s.reg
	nc.Deployment, nc.Deployments = cfg.Deployment, cfg.Deployments
	nc.DisableFillOwnership = cfg.CacheDisableFillOwnership
	// The lease monitor runs as an elected duty (duties.go).
	nc.LeaseMonitor = false
	if cfg.CacheBytes > 0 {
		c, err := cache.New(cache.Config{MaxBytes: cfg.CacheBytes, Registerer: s.reg})
		if err != nil {
			s.closeBlocks()
			st.Close()
			return nil, fmt.Errorf("server: metadata cache: %w", err)
		}
		nc.Cache = c
	}
	if err := s.setupCoherence(&nc, nc.Cache); err != nil {
		s.closeBlocks()
		st.Close()
		return nil, err
	}
	if m := cfg.SubtreeHeapMargin; m > 0 && nc.HoldMemory == nil {
		nc.HoldMemory = func() func() { return gctune.HoldHeap(m) }
	}
	ns, err := namespace.New(st, nc)
	if err != nil {
		s.closeBlocks()
		st.Close()
		return nil, fmt.Errorf("server: open namespace: %w", err)
	}
	s.ns = ns
	s.phase("namespace")
	if s.pebble != nil {
		// The store is this process's alone: nothing can be pending, and
		// nothing is served yet. (On a shared store: duties.go.)
		if n, err := ns.RemoveOrphanBlocks(context.Background(), nil); err != nil {
			s.log.Warn("looking for orphaned blocks", "err", err)
		} else if n > 0 {
			s.log.Info("removed orphaned block replicas", "count", n)
		}
	}
	lim := cfg.Limits.withDefaults()
	s.rpc = rpc.NewServer(ns, rpc.ServerOptions{Logger: s.log.With("component", "rpc"), Registerer: s.reg, Fsck: ns.Fsck,
		MaxConnBytes: lim.RPCConnBytes, MaxServerBytes: lim.RPCServerBytes, FrameTimeout: lim.RPCFrameTimeout, IdleTimeout: lim.RPCIdleTimeout,
		Tenants: s.tenants, Meter: s.meter, Router: &router{s: s, mapTTL: time.Second},
		// An instance's gateway runs on its machine and pins the callback
		// host to its client's (platform/callback_addr.go).
		TrustLoopbackCallback: cfg.PlatformInstance})
	wcfg := webhdfs.DefaultConfig()
	wcfg.Advertise = cfg.Advertise
	wcfg.Superuser = nc.Superuser
	wcfg.StatfsDir = cfg.DataDir
	wcfg.BodyIdleTimeout = lim.UploadIdleTimeout
	wcfg.Logger = s.log.With("component", "webhdfs")
	wcfg.Registerer = s.reg
	wcfg.Tenants = s.tenants
	wcfg.Meter = s.meter
	wh, err := webhdfs.New(ns, wcfg)
	if err != nil {
		ns.Close()
		s.closeBlocks()
		st.Close()
		return nil, err
	}
	s.web = wh
	if cfg.HadoopRPCAddr != "" {
		hc := hadooprpc.DefaultConfig()
		hc.Logger = s.log.With("component", "hadooprpc")
		hc.Registerer = s.reg
		hc.Tenants = s.tenants
		hc.Meter = s.meter
		if s.hrpc, err = hadooprpc.NewServer(ns, hc); err != nil {
			ns.Close()
			s.closeBlocks()
			st.Close()
			return nil, err
		}
	}

	mux := http.NewServeMux()
	mux.Handle("/rpc/", s.rpc.Handler())
	mux.HandleFunc("GET /rpc/{$}", rpcInfo)
	mux.Handle("/webhdfs/v1/", wh)
	mux.Handle("/webhdfs/v1", wh)
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	mux.HandleFunc("/readyz", s.readyz)
	s.routeStatusPage(mux) // GET /, /status/series, /status/page.js
	mux.HandleFunc("GET /status/tenants", s.tenantsJSON)
	mux.HandleFunc("GET /status/instance", s.instanceJSON)
	mux.HandleFunc("GET /status/load", s.loadJSON)
	mux.HandleFunc("GET /status/cluster", s.clusterJSON)
	mux.HandleFunc("GET /status/datanodes", s.dataNodesJSON)
	if s.coherence != nil {
		mux.Handle("POST "+loop.Path, s.coherence.Handler())
	}
	if cfg.DebugAddr != "" {
		dm := http.NewServeMux()
		dm.HandleFunc("/debug/pprof/", pprof.Index)
		dm.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		dm.HandleFunc("/debug/pprof/profile", pprof.Profile)
		dm.HandleFunc("/debug/pprof/trace", pprof.Trace)
		dm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.debug = &http.Server{Handler: dm, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	}
	// No ReadTimeout or WriteTimeout: they would cut long uploads, downloads
	// and upgraded RPC connections. Writes are bounded by the connection's
	// stall timeout instead (limitConn), request bodies by the handlers.
	// wh.Intercept: WebHDFS paths reach the gateway as sent, so that a raw
	// "/a/../b" is refused as HDFS does instead of redirected by the mux.
	s.phase("handlers")
	s.http = &http.Server{Handler: wh.Intercept(mux), ReadHeaderTimeout: lim.ReadHeaderTimeout, IdleTimeout: lim.IdleTimeout,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	return s, nil
}

// Engine returns the namespace engine (for in-process use and tests).
func (s *Server) Engine() *namespace.Engine { return s.ns }

// openStore opens the metadata store Config.StoreURL names.
func (s *Server) openStore(ctx context.Context) (store.Store, error) {
	cfg := s.cfg
	if cfg.UsesPostgres() {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil { // for the blocks
			return nil, fmt.Errorf("server: data directory: %w", err)
		}
		po := cfg.Postgres
		po.Logger = s.log.With("component", "store")
		po.Registerer = s.reg
		st, err := pgstore.Open(context.Background(), cfg.StoreURL, po)
		if err != nil {
			return nil, fmt.Errorf("server: open store %s: %w", RedactURL(cfg.StoreURL), err)
		}
		s.store = st
		return st, nil
	}
	metaDir := StoreDir(cfg.DataDir)
	if err := os.MkdirAll(metaDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data directory: %w", err)
	}
	so := cfg.Store
	so.Logger = s.log.With("component", "store")
	so.Registerer = s.reg
	st, err := pebblestore.OpenContext(ctx, metaDir, so)
	if err != nil {
		return nil, fmt.Errorf("server: open store in %s: %w", metaDir, err)
	}
	s.store, s.pebble = st, st
	return st, nil
}

// Start listens and serves in the background; it returns once the port is
// bound and the server answers /readyz with 200.
func (s *Server) Start(ctx context.Context) error {
	s.startupMark = time.Now() // the gap between New and Start is the caller's
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("server: listen on %s: %w", s.cfg.Listen, err)
	}
	if s.debug != nil {
		dl, err := lc.Listen(ctx, "tcp", s.cfg.DebugAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("server: listen on the debug address %s: %w", s.cfg.DebugAddr, err)
		}
		s.debugL = dl
		go func() {
			if err := s.debug.Serve(dl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Warn("debug listener", "addr", dl.Addr().String(), "err", err)
			}
		}()
		s.log.Info("profiler serving", "addr", "http://"+dl.Addr().String()+"/debug/pprof/")
	}
	if s.hrpc != nil {
		hl, err := lc.Listen(ctx, "tcp", s.cfg.HadoopRPCAddr)
		if err != nil {
			ln.Close()
			if s.debugL != nil {
				s.debugL.Close()
			}
			return fmt.Errorf("server: listen on the Hadoop RPC address %s: %w", s.cfg.HadoopRPCAddr, err)
		}
		s.hrpcL = hl
		s.hrpcWG.Add(1)
		go func() {
			defer s.hrpcWG.Done()
			if err := s.hrpc.Serve(context.Background(), hl); err != nil {
				s.log.Warn("hadoop rpc listener", "addr", hl.Addr().String(), "err", err)
			}
		}()
	}
	// Answers net/http gives before any handler runs go out in WebHDFS's shape.
	ln = s.limitListener(webhdfs.ShapeEarlyErrors(ln))
	s.ln = ln
	s.start = time.Now()
	// Named before the first request: its coordinator member id (the same
	// join gives) and the address clients can dial, in Nimbus-Instance
	// answers and connect-back hellos.
	s.rpc.SetInstance(s.memberID(), s.advertise())
	go func() { s.serveErr <- s.http.Serve(ln) }()
	s.phase("listen")
	// Registered once it answers at its address; ready once registered.
	select {
	case <-s.opening.done:
	case <-ctx.Done():
		return fmt.Errorf("server: opening the coordinator: %w", ctx.Err())
	}
	if s.opening.err != nil {
		return s.opening.err
	}
	coord := s.opening.coord
	s.coord, s.opening.coord = coord, nil
	s.phase("coordinator")
	if err := s.join(ctx); err != nil {
		return err
	}
	s.phase("join")
	if s.cfg.sharedCoordinator() {
		s.ns.SetLiveness(memberLiveness{coord})
	}
	s.startCoherence()
	s.phase("coherence")
	s.startDuties()
	s.ready.Store(true)
	s.startSampler()
	go s.watchStore()
	s.log.Info("nimbus serving", append([]any{"addr", s.Addr(), "hadoop_rpc", s.HadoopRPCAddr(), "data", s.cfg.DataDir, "coordinator", s.coordinatorName(),
		"member", s.Member().Member().ID}, s.startup...)...)
	return nil
}

// closeOpening closes the coordinator New opened if Start did not take
// it, once it is open: in the background, since an unreachable etcd takes
// its dial timeout to fail.
func (s *Server) closeOpening() {
	if s.opening.done == nil {
		return
	}
	go func() {
		<-s.opening.done
		if c := s.opening.coord; c != nil {
			_ = c.Close()
		}
	}()
}

// Addr returns the base URL, e.g. "http://127.0.0.1:9870".
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// DebugAddr returns the base URL of the debug listener, "" when there is none.
func (s *Server) DebugAddr() string {
	if s.debugL == nil {
		return ""
	}
	return "http://" + s.debugL.Addr().String()
}

// HadoopRPCAddr returns the Hadoop IPC listener's host:port, "" when there
// is none.
func (s *Server) HadoopRPCAddr() string {
	if s.hrpcL == nil {
		return ""
	}
	return s.hrpcL.Addr().String()
}

// Wait blocks until the HTTP server fails, the store fails (the fatal error,
// wrapping store.ErrFailed) or ctx is done.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.fatal.ch:
		return s.fatal.err
	case err := <-s.serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Stop shuts down gracefully: no new requests, in-flight ones finish (bounded
// by ctx), then the namespace and the store close. Safe to call twice. Once
// the store has failed, or ctx is done, it takes at most
// Config.FailStopTimeout more (failstop.go).
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.ready.Store(false)
		close(s.fatal.stopped)
		s.stopErr = s.stopBounded(ctx)
	})
	return s.stopErr
}

// shutdown closes everything in order, waiting for in-flight requests.
func (s *Server) shutdown(ctx context.Context) error {
	var errs []error
	// Elected duties end (and resign) before the server leaves.
	s.stopDuties()
	s.stopSampler()
	// The RPC's and WebHDFS's requests drain while the server is still a member: a write
	// in flight needs its coherence session to commit (after leave its
	// invalidations would wait for a session that never comes back, holding
	// its rows locked until the stop's deadline, and every peer's writes
	// on them too). New RPC requests are refused meanwhile (503: not run).
	errs = append(errs, s.rpc.Shutdown(ctx))
	// WebHDFS's requests drain the same way (new ones are refused with
	// 503 RetriableException meanwhile).
	errs = append(errs, s.web.Shutdown(ctx))
	// Hadoop RPC connections stop reading calls, those in flight are
	// answered, then the connections close; Hadoop's client sends what it
	// had not sent again on a new connection.
	if s.hrpc != nil {
		errs = append(errs, s.hrpc.Shutdown(ctx))
		s.hrpcWG.Wait()
	}
	// Peers see this server leave before it stops answering.
	if err := s.leave(ctx); err != nil {
		s.log.Warn("leaving the coordinator", "err", err)
	}
	if s.ln != nil {
		errs = append(errs, s.http.Shutdown(ctx))
	}
	if s.debugL != nil {
		errs = append(errs, s.debug.Close()) // a profile in progress is cut off
	}
	if s.coherence != nil {
		s.coherence.Stop()
	}
	errs = append(errs, s.ns.Close())
	if s.blocks != nil {
		errs = append(errs, s.blocks.Close())
	}
	errs = append(errs, s.store.Close())
	s.closeOpening() // opened by New, never taken by Start
	if s.coord != nil {
		errs = append(errs, s.coord.Close())
	}
	err := errors.Join(errs...)
	s.shutDown.Store(true)
	if s.ln != nil { // a server that never served has nothing to announce
		s.log.Info("nimbus stopped", "err", err)
	}
	return err
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.fatal.failed() {
		http.Error(w, "failed: "+s.fatal.err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !s.ready.Load() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}
