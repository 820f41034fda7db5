package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/datapath/maintain"
	"github.com/nimbus-fs/nimbus/internal/gctune"
	"github.com/nimbus-fs/nimbus/server"
	"github.com/nimbus-fs/nimbus/tenant"
)

// serverFlags are the flags of one server that `nimbus serve` and `nimbus
// namenode` share (one place, so that an instance the local platform
// starts takes every setting a plain server does); each command adds its
// own (serve: --daemon, --pid-file, the platform's; namenode: none).
type serverFlags struct {
	cacheMB, memLimitMB, subtreeHeapMB *int64
	memtableMB                         *uint64
	level                              *string
	grace                              *time.Duration
	applyLimits                        func()
	hadoopRPC                          string
}

// defaultHadoopRPC is --hadoop-rpc-addr's value when not given: see
// hadoopRPCAddr.
const defaultHadoopRPC = "default"

// hadoopRPCAddr is the Hadoop IPC address: flag as given, or by default
// HDFS's NameNode port 8020 on listen's host when listen is on HDFS's (and
// Nimbus's default) HTTP port 9870, the pair HDFS uses; none on any other
// port, since servers on other ports (tests, several servers on one
// machine, the HDFS peer of bench/hdfs next to Nimbus) would collide on a
// fixed one.
func hadoopRPCAddr(flag, listen string) string {
	if flag != defaultHadoopRPC {
		return flag
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port != "9870" {
		return ""
	}
	return net.JoinHostPort(host, "8020")
}

// addServerFlags defines the server flags on fl, writing into cfg.
func addServerFlags(fl *flag.FlagSet, cfg *server.Config) *serverFlags {
	sf := &serverFlags{}
	fl.StringVar(&cfg.DataDir, "data", cfg.DataDir, "directory holding the metadata store (created if missing); with --store postgres://..., the blocks only")
	fl.StringVar(&cfg.StoreURL, "store", "pebble", "metadata store: pebble (embedded, in --data) or postgres://USER@HOST:PORT/DB (a PostgreSQL database several servers may share; libpq URL, password from PGPASSWORD or ~/.pgpass)")
	fl.StringVar(&cfg.BlockStorage, "block-storage", server.BlockStorageLocal, "where the bytes of files beyond --inline-threshold live: local (in --data, written through this server) or datanodes (on the DataNodes registered in the --store, `nimbus datanode`; clients write and read blocks there themselves; needs --store postgres://...)")
	fl.DurationVar(&cfg.DataNodeLiveness.Heartbeat, "datanode-heartbeat", 0, "the DataNodes' heartbeat period, as their --heartbeat, by which this server judges them live, stale or dead (0: the default of nimbus datanode)")
	fl.DurationVar(&cfg.DataNodeLiveness.StaleAfter, "datanode-stale-after", 0, "as the DataNodes' --stale-after")
	fl.DurationVar(&cfg.DataNodeLiveness.DeadAfter, "datanode-dead-after", 0, "as the DataNodes' --dead-after")
	md := maintain.DefaultConfig()
	fl.DurationVar(&cfg.Maintenance.Interval, "maintain-interval", md.Interval, "with --block-storage datanodes: time between rounds of the replication duty (re-replication, trimming, corrupt replicas, orphans, decommissions), which one server among those sharing the store runs")
	fl.DurationVar(&cfg.Maintenance.OrphanGrace, "block-orphan-grace", md.OrphanGrace, "with --block-storage datanodes: a replica no block row names is deleted once the replication duty has seen it so for this long")
	fl.IntVar(&cfg.Maintenance.BlocksPerRound, "maintain-blocks-per-round", md.Limits.BlocksPerRound, "with --block-storage datanodes: the most blocks a round of the replication duty acts on")
	fl.IntVar(&cfg.Postgres.PoolSize, "pg-pool-size", cfg.Postgres.PoolSize, "with --store postgres: most connections to the database (a transaction holding row locks holds one)")
	fl.DurationVar(&cfg.Postgres.StatementTimeout, "pg-statement-timeout", cfg.Postgres.StatementTimeout, "with --store postgres: PostgreSQL's statement_timeout; a longer statement is cancelled and its operation fails (0: none)")
	fl.DurationVar(&cfg.Postgres.LockTimeout, "pg-lock-timeout", cfg.Postgres.LockTimeout, "with --store postgres: PostgreSQL's lock_timeout, the longest wait for one row lock; after it the operation is retried")
	fl.DurationVar(&cfg.Postgres.ConnectTimeout, "pg-connect-timeout", cfg.Postgres.ConnectTimeout, "with --store postgres: bound on connecting to the database; serve fails at start after it")
	fl.IntVar(&cfg.Postgres.ReadConcurrency, "pg-read-concurrency", cfg.Postgres.ReadConcurrency, "with --store postgres: most unlocked reads (stats, path lookups) sent to the database at once; reads arriving meanwhile go together in one statement (0: each read its own statement at once)")
	fl.DurationVar(&cfg.Postgres.DeadPeerTimeout, "pg-dead-peer-timeout", cfg.Postgres.DeadPeerTimeout, "with --store postgres: a connection to a database host that went silent (no answer to TCP keepalives, sent data unacknowledged) is dropped after about this long and the operation fails retryably (0: the kernel's defaults)")
	fl.StringVar(&cfg.Coordinator, "coordinator", server.CoordinatorInProcess, "membership, liveness and election service this server registers with: inprocess, or etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (etcd servers several servers share)")
	fl.DurationVar(&cfg.CoordinatorTTL, "coordinator-ttl", 0, "with --coordinator etcd://...: the lease TTL, whole seconds; a server cut off from etcd longer stops counting as alive (default 10s)")
	fl.StringVar(&cfg.Listen, "listen", cfg.Listen, "HTTP address for the RPC, WebHDFS, /metrics and /readyz (default: NIMBUS_ADDR's host:port when set)")
	fl.StringVar(&cfg.Advertise, "advertise", "", "base URL put in WebHDFS redirects (default: the address each request came to)")
	fl.StringVar(&sf.hadoopRPC, "hadoop-rpc-addr", defaultHadoopRPC, "address of the Hadoop IPC listener for hdfs:// clients (ClientNamenodeProtocol, docs/HDFS-RPC.md); empty: none. Default: port 8020 (HDFS's) on --listen's host when --listen is on port 9870, else none")
	fl.StringVar(&cfg.DebugAddr, "debug-addr", "", "address of a second HTTP listener serving /debug/pprof/ (default: none; the profiler is never on --listen)")
	fl.Float64Var(&cfg.Prices.PerGBSecond, "price-gb-second", cfg.Prices.PerGBSecond, "USD per GB-second of active instance time, for the cost on `nimbus status` (the λFS paper's, AWS Lambda's)")
	fl.Float64Var(&cfg.Prices.PerMillionInvocation, "price-million-invocations", cfg.Prices.PerMillionInvocation, "USD per million invocations (requests), for the cost on `nimbus status`")
	fl.Float64Var(&cfg.Prices.MemoryGB, "instance-memory-gb", cfg.Prices.MemoryGB, "an instance's memory in GB, what a GB-second of its active time counts")
	fl.IntVar(&cfg.Tenants.Top, "tenant-top", 20, "tenants (users, user/job) counted by name on /metrics and `nimbus status --tenants`; the rest count as \"other\"")
	fl.Func("tenant-limit", "`USER=OPS/S` or USER/JOB=OPS/S: most requests per second of that tenant (a user's limit covers its jobs); more are refused with a retryable busy error. Repeat for several", func(v string) error {
		id, r, err := tenant.ParseLimit(v)
		if err != nil {
			return err
		}
		if cfg.Tenants.Limits == nil {
			cfg.Tenants.Limits = map[string]float64{}
		}
		cfg.Tenants.Limits[id] = r
		return nil
	})
	fl.Func("min-block-size", fmt.Sprintf("smallest block size a create may ask for, bytes or with suffix k/m/g, 0 for none (default %d)", cfg.Namespace.MinBlockSize), func(v string) (err error) {
		cfg.Namespace.MinBlockSize, err = parseSize(v)
		return err
	})
	fl.IntVar(&cfg.Namespace.MaxBlocksPerFile, "max-blocks-per-file", cfg.Namespace.MaxBlocksPerFile, "most blocks one file may have")
	fl.DurationVar(&cfg.Namespace.SubtreeWait, "subtree-wait", cfg.Namespace.SubtreeWait, "how long an operation below a directory under a move, chmod, chown, set-quota or recursive delete waits for it before failing busy")
	fl.DurationVar(&cfg.Namespace.Beat, "instance-beat", cfg.Namespace.Beat, "with a shared --store: how often this server counts up its row in the instance table, by which the others know it is alive")
	fl.DurationVar(&cfg.Namespace.GoneAfter, "instance-gone-after", cfg.Namespace.GoneAfter, "with a shared --store: how long another server's count may stand still before it is judged gone and its subtree operations are cleared or finished (at least 3 beats)")
	fl.DurationVar(&cfg.Namespace.RequestTTL, "request-ttl", cfg.Namespace.RequestTTL, "how long the record of a write is kept in the store, by which a client's resubmission after a lost reply is answered instead of applied again (exactly once), and a write received more than half of it ago is not started; 0 switches duplicate detection off; the same on every server of a cluster: the first server records it in the store, and a server started with another refuses to start")
	fl.DurationVar(&cfg.Namespace.RequestSweep, "request-sweep", cfg.Namespace.RequestSweep, "how often records older than --request-ttl are deleted")
	fl.IntVar(&cfg.Namespace.MaxXAttrsPerInode, "max-xattrs-per-inode", cfg.Namespace.MaxXAttrsPerInode, "most extended attributes one file or directory may have (HDFS's dfs.namenode.fs-limits.max-xattrs-per-inode)")
	fl.IntVar(&cfg.Namespace.MaxXAttrSize, "max-xattr-size", cfg.Namespace.MaxXAttrSize, "largest extended attribute, name (without its namespace) and value together, in bytes (at most 32768)")
	fl.StringVar(&cfg.Namespace.Superuser, "superuser", cfg.Namespace.Superuser, "the superuser (default: the user running the server)")
	fl.Int64Var(&cfg.Namespace.InlineThreshold, "inline-threshold", cfg.Namespace.InlineThreshold, "largest file kept in the metadata store, in bytes")
	fl.DurationVar(&cfg.Namespace.LeaseSoftLimit, "lease-soft-limit", cfg.Namespace.LeaseSoftLimit, "after this silence another client may take over a file being written")
	fl.DurationVar(&cfg.Namespace.LeaseHardLimit, "lease-hard-limit", cfg.Namespace.LeaseHardLimit, "after this silence the server recovers and closes a file being written")
	sf.cacheMB = fl.Int64("cache-mb", cfg.Store.CacheSize>>20, "store block cache, in MiB")
	sf.memtableMB = fl.Uint64("memtable-mb", cfg.Store.MemTableSize>>20, "size of one store memtable (and of its write-ahead log), in MiB")
	fl.IntVar(&cfg.Store.RowCacheEntries, "row-cache-rows", cfg.Store.RowCacheEntries, "rows (up to 1 KB each) the store keeps in memory in front of Pebble, 0 for none")
	fl.IntVar(&cfg.Deployment, "deployment", cfg.Deployment, "the deployment this server is an instance of, 0 to --deployments - 1: it joins the coordinator in it, and its cache holds only the entries its deployment owns besides directory rows")
	fl.IntVar(&cfg.Deployments, "deployments", cfg.Deployments, "how many deployments share the namespace (cache entries and their invalidations are partitioned among them by the hash of the directory id); the same on every server of a cluster: the first server records it in the store, and a server started with another number refuses to start")
	fl.BoolVar(&cfg.CacheDisableFillOwnership, "cache-disable-ownership", false, "testing only: the cache fills entries its deployment does not own, while invalidations still go only to the owner (caches go stale); never in production")
	fl.BoolVar(&cfg.CoherenceDisableInvalidation, "coherence-disable-invalidation", false, "testing only: servers sharing a store send each other no cache invalidations (their caches go stale); never in production")
	fl.Func("cache-bytes", "byte budget of the NameNode's metadata cache (stats and listings of cached paths without a store round trip), bytes or with suffix k/m/g; 0 for none (the default). On PostgreSQL with --coordinator etcd://... the caches of all servers on the database are kept coherent (INV/ACK between servers, fenced in the database); with the in-process coordinator only a server alone on its store may cache", func(v string) (err error) {
		cfg.CacheBytes, err = parseSize(v)
		return err
	})
	fl.IntVar(&cfg.Namespace.HintCacheEntries, "hint-cache-entries", cfg.Namespace.HintCacheEntries, "directories whose ids the namespace keeps to build keys without reading")
	sf.memLimitMB = fl.Int64("memory-limit-mb", -1, "soft limit of the server's Go memory, in MiB, 0 for none (default: 2048 + the block cache + two memtables, unless GOMEMLIMIT is set)")
	sf.subtreeHeapMB = fl.Int64("subtree-heap-margin-mb", cfg.SubtreeHeapMargin>>20, "while a recursive delete, chmod -R or chown -R works, the Go heap may grow by at most this many MiB over what it held when the work started (the soft memory limit is lowered meanwhile), 0 for no bound")
	sf.level = fl.String("log-level", "info", "log level: debug, info, warn, error")
	sf.grace = fl.Duration("shutdown-timeout", 30*time.Second, "how long in-flight requests may take on shutdown")
	fl.DurationVar(&cfg.FailStopTimeout, "fail-stop-timeout", cfg.FailStopTimeout, "after the metadata store failed (disk full, data directory removed), how long the server waits for requests stuck on it before it exits non-zero")
	fl.DurationVar(&cfg.Store.IdentityCheckInterval, "data-check-interval", cfg.Store.IdentityCheckInterval, "how often the server checks that its data directory is still the one it opened (0: never); a removed or replaced one stops it")
	sf.applyLimits = limitFlags(fl, &cfg.Limits)
	return sf
}

// finish checks the parsed flags and applies them to cfg; it returns the
// log level, or an exit status 2 after printing why (cmd names the command
// in messages).
func (sf *serverFlags) finish(cmd string, fl *flag.FlagSet, cfg *server.Config, stderr io.Writer) (slog.Level, int) {
	sf.applyLimits()
	cfg.HadoopRPCAddr = hadoopRPCAddr(sf.hadoopRPC, cfg.Listen)
	bad := func(format string, a ...any) (slog.Level, int) {
		fmt.Fprintf(stderr, cmd+": "+format+"\n", a...)
		return 0, 2
	}
	if cfg.StoreURL != "pebble" && !cfg.UsesPostgres() {
		return bad("bad --store %q: want pebble or postgres://USER@HOST:PORT/DB", server.RedactURL(cfg.StoreURL))
	}
	switch cfg.BlockStorage {
	case server.BlockStorageLocal:
	case server.BlockStorageDataNodes:
		if !cfg.UsesPostgres() {
			return bad("--block-storage datanodes needs --store postgres://...: the DataNodes register in the store the server reads")
		}
	default:
		return bad("bad --block-storage %q: want local or datanodes", cfg.BlockStorage)
	}
	if l := cfg.DataNodeLiveness; l.Heartbeat != 0 || l.StaleAfter != 0 || l.DeadAfter != 0 {
		d := registry.DefaultConfig()
		if l.Heartbeat == 0 {
			l.Heartbeat = d.Heartbeat
		}
		if l.StaleAfter == 0 {
			l.StaleAfter = d.StaleAfter
		}
		if l.DeadAfter == 0 {
			l.DeadAfter = d.DeadAfter
		}
		l.Batch = d.Batch
		if err := l.Validate(); err != nil {
			return bad("%v (--datanode-heartbeat, --datanode-stale-after, --datanode-dead-after)", err)
		}
		cfg.DataNodeLiveness = l
	}
	if m := cfg.Maintenance; m.Interval <= 0 || m.OrphanGrace <= 0 || m.BlocksPerRound <= 0 {
		return bad("bad --maintain-interval %v, --block-orphan-grace %v or --maintain-blocks-per-round %d: want each above 0", m.Interval, m.OrphanGrace, m.BlocksPerRound)
	}
	if err := cfg.ValidateCoordinator(); err != nil {
		return bad("bad --coordinator: %v", err)
	}
	if fl.NArg() != 0 {
		return bad("unexpected argument %q", fl.Arg(0))
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*sf.level)); err != nil {
		return bad("bad -log-level %q", *sf.level)
	}
	switch {
	case *sf.cacheMB < 0:
		return bad("bad --cache-mb %d: want 0 or more", *sf.cacheMB)
	case *sf.memtableMB < 1 || *sf.memtableMB >= 4<<10:
		return bad("bad --memtable-mb %d: want 1 to 4095", *sf.memtableMB)
	case cfg.Store.RowCacheEntries < 0:
		return bad("bad --row-cache-rows %d: want 0 (no cache) or more", cfg.Store.RowCacheEntries)
	case cfg.Namespace.HintCacheEntries < 1:
		return bad("bad --hint-cache-entries %d: want 1 or more", cfg.Namespace.HintCacheEntries)
	case *sf.memLimitMB < -1:
		return bad("bad --memory-limit-mb %d: want 0 (none) or more", *sf.memLimitMB)
	case *sf.subtreeHeapMB < 0:
		return bad("bad --subtree-heap-margin-mb %d: want 0 (no bound) or more", *sf.subtreeHeapMB)
	}
	cfg.SubtreeHeapMargin = *sf.subtreeHeapMB << 20
	cfg.Store.CacheSize = *sf.cacheMB << 20
	cfg.Store.MemTableSize = *sf.memtableMB << 20
	if cfg.Namespace.LeaseSoftLimit > cfg.Namespace.LeaseHardLimit {
		cfg.Namespace.LeaseSoftLimit = cfg.Namespace.LeaseHardLimit
	}
	return lv, 0
}

// tuneRuntime sets the collector and the memory limit for a server and
// returns the GOGC in force.
func (sf *serverFlags) tuneRuntime(ctx context.Context, cfg server.Config) string {
	// The server's live heap is small and its allocation rate high (every
	// request decodes rows and frames), so the default GOGC=100 spends a
	// large share of the CPU in the collector. Unless GOGC is set, collect
	// less often.
	gogc := os.Getenv("GOGC")
	tune := gogc == ""
	if tune {
		gogc = "400"
		debug.SetGCPercent(400)
	}
	// GOGC=400 lets the heap grow to five times what is live, and what is
	// live grows with the caches as they fill (rows, hints, partitions): a
	// long run ended at 4.4 GB resident without a limit. A soft limit bounds
	// it; but near the limit the runtime returns memory that the next cycle
	// faults back in, so the tuner keeps the heap goal well under it.
	if limit := memoryLimit(*sf.memLimitMB, os.Getenv("GOMEMLIMIT") != "", cfg.Store.CacheSize, cfg.Store.MemTableSize); limit >= 0 {
		debug.SetMemoryLimit(limit)
	}
	if tune {
		// GOGC=400 until what is live grows: then lower, so that the heap
		// goal stays at 60% of the limit instead of running into it.
		go gctune.Run(ctx, gctune.Config{Share: 0.6, Min: 50, Max: 400, Every: 250 * time.Millisecond,
			OnTune: func(gogc int, live uint64) {
				cfg.Logger.Debug("gc tuned", "gogc", gogc, "live_mb", live>>20)
			}})
	}
	return gogc
}
