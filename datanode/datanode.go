package datanode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	retry "github.com/nimbus-fs/nimbus/internal/backoff"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/store"
)

// DataNode is one DataNode process's state: its storage directory, its
// replicas, its ports and its publications in the registry. New opens and
// registers it; Run serves until its context ends; Close (or the end of
// Run) stops it. A clean stop does not mark it down: it stops beating,
// and NameNodes judge it stale, then dead, as they would after a crash
// (as HDFS does).
type DataNode struct {
	cfg     Config
	log     *slog.Logger
	reg     *registry.Registry
	cluster registry.Cluster
	stor    *storage
	local   *local.Store
	blocks  *reportingStore
	ch      *changes
	m       *metrics
	dataLn  net.Listener
	httpLn  net.Listener
	data    DataServer
	httpSrv *http.Server
	host    string
	started time.Time
	dataPub string // published addresses
	httpPub string
	key     *clusterauth.Key    // member requests (commands)
	tokens  *blocktoken.Manager // block tokens
	limiter *bandwidth          // background transfers

	recMu      sync.Mutex
	recoveries map[uint64]uint64 // block -> the largest recovery id started

	id        atomic.Uint64
	transfers atomic.Int64
	failed    atomic.Bool   // the last storage check failed
	fullNow   chan struct{} // one token: send a full report now
	// Tokens put in fullNow, and full reports sent for one: equal when no
	// report that was asked for is waiting or under way.
	fullAsked, fullAnswered atomic.Uint64

	mu struct {
		sync.Mutex
		lastBeat time.Time // last heartbeat (or registration) recorded
		beatErr  error     // the last heartbeat's error
		used     int64
		replicas int
	}

	runStarted atomic.Bool
	closeOnce  sync.Once
	closeErr   error
}

// New opens the storage directory (locking it, and checking that it is
// this store's cluster's: ErrOtherCluster, ErrInUse, ErrBadStorage), opens
// its replicas, listens on the data and HTTP ports and registers the
// DataNode in st. st must be one that every NameNode reaches (a shared
// store); the caller closes it after the DataNode.
func New(ctx context.Context, cfg Config, st store.Store) (_ *DataNode, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &DataNode{cfg: cfg, log: cfg.Logger, ch: newChanges(), fullNow: make(chan struct{}, 1), started: time.Now()}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.host = cfg.Host
	if d.host == "" {
		if d.host, err = os.Hostname(); err != nil || d.host == "" {
			d.host = "localhost"
		}
	}
	defer func() {
		if err != nil {
			d.closeAll()
		}
	}()
	if d.reg, err = registry.New(st, cfg.Liveness); err != nil {
		return nil, err
	}
	if d.cluster, err = registry.LoadCluster(ctx, st); err != nil {
		return nil, fmt.Errorf("datanode: %w", err)
	}
	if d.stor, err = openStorage(cfg.Dir, d.cluster, d.started); err != nil {
		return nil, err
	}
	bcfg := cfg.Blocks
	bcfg.Logger = d.log
	bcfg.Registerer = cfg.Registerer
	if d.local, err = local.Open(d.stor.blocks, bcfg); err != nil {
		return nil, fmt.Errorf("datanode: %w", err)
	}
	d.blocks = &reportingStore{Store: d.local, ch: d.ch}
	if d.m, err = newMetrics(cfg.Registerer, func() float64 { return float64(d.ch.len()) },
		func() float64 { return float64(d.transfers.Load()) }); err != nil {
		return nil, fmt.Errorf("datanode: metrics: %w", err)
	}
	if d.dataLn, err = net.Listen("tcp", cfg.DataAddr); err != nil {
		return nil, fmt.Errorf("datanode: data port: %w", err)
	}
	if d.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("datanode: HTTP port: %w", err)
	}
	mux := http.NewServeMux()
	g := cfg.Gatherer
	if g == nil {
		g = prometheus.NewRegistry()
	}
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", d.healthz)
	d.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	d.dataPub = publish(cfg.DataAddr, d.dataLn.Addr(), d.host)
	d.httpPub = publish(cfg.HTTPAddr, d.httpLn.Addr(), d.host)
	secret, err := clusterauth.LoadSecret(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("datanode: %w", err)
	}
	if d.key, err = clusterauth.New(secret, nil); err != nil {
		return nil, fmt.Errorf("datanode: %w", err)
	}
	// Key id 0: Verify derives the key of the id a token names, so any
	// NameNode's key id verifies; the DataNode issues only for its copies.
	d.tokens = blocktoken.NewManager([32]byte(secret), 0, nil)
	d.limiter = newBandwidth(cfg.ReplicationBandwidth)
	d.recoveries = map[uint64]uint64{}
	env := DataServerEnv{Store: d.blocks, Cluster: d.cluster, UUID: d.stor.version.DataNodeUUID,
		TransferStarted: d.transferStarted, Logger: d.log.With("part", "dataxfer"), Registerer: cfg.Registerer}
	if !cfg.NoBlockTokens {
		env.Tokens = d.tokens
	}
	if cfg.NewDataServer != nil {
		d.data, err = cfg.NewDataServer(env)
	} else {
		d.data, err = newDataxferServer(cfg.Transfer, env)
	}
	if err != nil {
		return nil, fmt.Errorf("datanode: data server: %w", err)
	}
	d.commands(mux)
	if err := d.countUsage(ctx); err != nil {
		return nil, err
	}
	id, err := d.reg.Register(ctx, d.heartbeat())
	if err != nil {
		return nil, fmt.Errorf("datanode: %w", err)
	}
	d.id.Store(id)
	d.noteBeat(nil)
	d.log.Info("DataNode registered", "id", id, "uuid", d.stor.version.DataNodeUUID, "cluster", d.cluster.ID,
		"zone", cfg.Zone, "data", d.dataPub, "http", d.httpPub, "dir", cfg.Dir)
	return d, nil
}

// publish is the address to publish for a listener: the listen address's
// host when it has one, else host, with the port bound.
func publish(listen string, bound net.Addr, host string) string {
	h, _, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		h = host
	}
	port := 0
	if a, ok := bound.(*net.TCPAddr); ok {
		port = a.Port
	}
	return net.JoinHostPort(h, strconv.Itoa(port))
}

// ID is the DataNode's id in the registry.
func (d *DataNode) ID() uint64 { return d.id.Load() }

// UUID is the DataNode's identity, kept in its storage directory.
func (d *DataNode) UUID() string { return d.stor.version.DataNodeUUID }

// Cluster is the cluster the DataNode belongs to.
func (d *DataNode) Cluster() registry.Cluster { return d.cluster }

// DataAddr and HTTPAddr are the published addresses of its ports.
func (d *DataNode) DataAddr() string { return d.dataPub }

// HTTPAddr is the published address of its HTTP port.
func (d *DataNode) HTTPAddr() string { return d.httpPub }

// Blocks is the DataNode's replica store: changes made through it are
// reported, as the data server's are.
func (d *DataNode) Blocks() blocks.Store { return d.blocks }

// TriggerFullReport asks for a full block report at once.
func (d *DataNode) TriggerFullReport() {
	select {
	case d.fullNow <- struct{}{}:
		d.fullAsked.Add(1)
	default:
	}
}

func (d *DataNode) transferStarted() func() {
	d.transfers.Add(1)
	var once sync.Once
	return func() { once.Do(func() { d.transfers.Add(-1) }) }
}

// Run serves the data and HTTP ports, beats and reports until ctx ends or
// the data server fails, then stops everything (Close) and returns nil, or
// the failure.
func (d *DataNode) Run(ctx context.Context) error {
	if !d.runStarted.CompareAndSwap(false, true) {
		return errors.New("datanode: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fatal := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := d.data.Serve(d.dataLn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, dataxfer.ErrServerClosed) && ctx.Err() == nil {
			fatal <- fmt.Errorf("datanode: data server: %w", err)
		}
	})
	wg.Go(func() {
		if err := d.httpSrv.Serve(d.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
			fatal <- fmt.Errorf("datanode: HTTP server: %w", err)
		}
	})
	wg.Go(func() { d.heartbeatLoop(ctx) })
	wg.Go(func() { d.reportLoop(ctx) })
	var err error
	select {
	case <-ctx.Done():
	case err = <-fatal:
		d.log.Error("DataNode stops", "err", err)
	}
	cancel()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	wg.Wait()
	return err
}

// Close stops the DataNode: its ports, then its replica store, then its
// directory lock. Safe to call more than once and with Run running (Run
// then returns).
func (d *DataNode) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.closeAll() })
	return d.closeErr
}

func (d *DataNode) closeAll() error {
	var errs []error
	if d.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := d.httpSrv.Shutdown(ctx); err != nil {
			d.httpSrv.Close()
		}
		cancel()
	}
	if d.httpLn != nil {
		d.httpLn.Close() // Shutdown closes it only if Serve took it
	}
	if d.data != nil {
		errs = append(errs, d.data.Close())
	}
	if d.dataLn != nil {
		d.dataLn.Close()
	}
	if d.local != nil {
		errs = append(errs, d.local.Close())
	}
	if d.m != nil {
		d.m.unregister()
	}
	if d.stor != nil {
		d.stor.close()
	}
	return errors.Join(errs...)
}

// heartbeat is what the DataNode publishes of itself now.
func (d *DataNode) heartbeat() registry.Heartbeat {
	hb := registry.Heartbeat{
		UUID: d.stor.version.DataNodeUUID, StorageID: d.stor.version.StorageID, Host: d.host,
		DataAddr: d.dataPub, HTTPAddr: d.httpPub, Zone: d.cfg.Zone, Version: d.cfg.Version, Started: d.started,
		Transfers: uint32(max(0, d.transfers.Load())),
	}
	d.mu.Lock()
	hb.Used, hb.Replicas = d.mu.used, int64(d.mu.replicas)
	d.mu.Unlock()
	total, avail, err := statfs(d.stor.blocks)
	cerr := d.stor.check()
	hb.Failed = cerr != nil || err != nil
	if d.failed.Swap(hb.Failed) != hb.Failed {
		if hb.Failed {
			d.log.Error("storage directory check failed: no new replicas", "dir", d.cfg.Dir, "err", errors.Join(cerr, err))
		} else {
			d.log.Info("storage directory check passes again", "dir", d.cfg.Dir)
		}
	}
	if err == nil {
		hb.Capacity = max(0, total-d.cfg.Reserved)
		hb.Remaining = max(0, avail-d.cfg.Reserved)
		hb.Full = avail <= d.cfg.Reserved
	}
	d.m.capacity.Set(float64(hb.Capacity))
	d.m.remaining.Set(float64(hb.Remaining))
	d.m.used.Set(float64(hb.Used))
	d.m.full.Set(boolGauge(hb.Full))
	d.m.failed.Set(boolGauge(hb.Failed))
	return hb
}

func (d *DataNode) noteBeat(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.beatErr = err
	if err == nil {
		d.mu.lastBeat = time.Now()
	}
}

func (d *DataNode) heartbeatLoop(ctx context.Context) {
	tick := time.NewTicker(d.cfg.Liveness.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d.beat(ctx)
	}
}

// beat sends one heartbeat; after the registry lost the DataNode's row it
// registers again, and after a silence the NameNodes took for death it
// asks for a full report (they discount a dead DataNode's replicas).
func (d *DataNode) beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Liveness.StaleAfter/2)
	defer cancel()
	d.mu.Lock()
	silent := time.Since(d.mu.lastBeat)
	d.mu.Unlock()
	hb := d.heartbeat()
	err := d.reg.Heartbeat(ctx, d.id.Load(), hb)
	if errors.Is(err, registry.ErrUnknownDataNode) {
		d.log.Warn("the registry lost this DataNode's row: registering again", "id", d.id.Load())
		var id uint64
		if id, err = d.reg.Register(ctx, hb); err == nil {
			d.id.Store(id)
			d.TriggerFullReport()
		}
	}
	if err != nil {
		d.m.heartbeatFailures.Inc()
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			d.log.Warn("heartbeat failed", "err", err)
		}
		d.noteBeat(err)
		return
	}
	d.m.heartbeats.Inc()
	d.noteBeat(nil)
	if silent >= d.cfg.Liveness.DeadAfter {
		d.log.Warn("heartbeats were failing longer than NameNodes wait before judging a DataNode dead: sending a full report", "silent", silent.Round(time.Second))
		d.TriggerFullReport()
	}
}

// reportLoop sends the full reports and the incremental ones, one at a
// time (a DataNode's reports must not overlap: the registry's contract).
func (d *DataNode) reportLoop(ctx context.Context) {
	first := time.Duration(0)
	if d.cfg.FullReportInitialDelay > 0 {
		first = rand.N(d.cfg.FullReportInitialDelay)
	}
	full := time.NewTimer(first)
	defer full.Stop()
	usage := time.NewTicker(d.cfg.UsageInterval)
	defer usage.Stop()
	var retry *time.Timer // an incremental report to try again
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	var retryC <-chan time.Time
	fullFailures, incrFailures := 0, 0
	for {
		asked := false
		select {
		case <-ctx.Done():
			return
		case <-full.C:
		case <-d.fullNow:
			full.Stop()
			asked = true
		case <-d.ch.wake:
			if retryC != nil {
				continue // waiting to try again
			}
			if err := d.sendIncremental(ctx); err != nil {
				incrFailures++
				retry = time.NewTimer(backoff(d.cfg.Liveness.Heartbeat, incrFailures))
				retryC = retry.C
			} else {
				incrFailures = 0
			}
			continue
		case <-retryC:
			retryC = nil
			select {
			case d.ch.wake <- struct{}{}:
			default:
			}
			continue
		case <-usage.C:
			if err := d.countUsage(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("counting the space replicas take", "err", err)
			}
			continue
		}
		err := d.sendFull(ctx)
		if asked {
			d.fullAnswered.Add(1)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fullFailures++
			wait := backoff(d.cfg.Liveness.Heartbeat, fullFailures)
			d.log.Warn("full block report failed; sending it again", "in", wait, "err", err)
			full.Reset(wait)
			continue
		}
		fullFailures = 0
		full.Reset(d.cfg.FullReportInterval)
	}
}

// backoff is base × 2^(failures-1), at most a minute.
func backoff(base time.Duration, failures int) time.Duration {
	return retry.Policy{Initial: base, Max: time.Minute}.Delay(failures - 1)
}

// sendIncremental sends the pending changes, in batches, until none are
// left; a failed batch goes back to the queue.
func (d *DataNode) sendIncremental(ctx context.Context) error {
	batch := d.cfg.Liveness.Batch
	for {
		chs := d.ch.take(batch)
		if len(chs) == 0 {
			return nil
		}
		if err := d.reg.IncrementalReport(ctx, d.id.Load(), chs); err != nil {
			d.ch.putBack(chs)
			d.m.incrFailures.Inc()
			if ctx.Err() == nil {
				d.log.Warn("incremental block report failed; sending it again", "changes", len(chs), "err", err)
			}
			return err
		}
		d.m.incrReports.Inc()
		d.m.incrChanges.Add(float64(len(chs)))
	}
}

// sendFull sends a full block report: every replica on disk, in block
// order, reconciled with the DataNode's rows.
func (d *DataNode) sendFull(ctx context.Context) error {
	start := time.Now()
	fr := d.reg.FullReport(d.id.Load())
	var used int64
	n := 0
	err := d.local.Report(ctx, func(r blocks.Replica) error {
		used += r.DiskBytes
		n++
		st := store.ReplicaFinalized
		switch {
		case d.ch.isCorrupt(r.ID):
			st = store.ReplicaCorrupt
		case r.State == blocks.BeingWritten:
			st = store.ReplicaBeingWritten
		}
		return fr.Add(ctx, registry.Reported{Block: r.ID.Block, GenStamp: r.ID.GenStamp, Length: r.Length, State: st})
	})
	var stats registry.ReportStats
	if err == nil {
		stats, err = fr.Finish(ctx)
	}
	if errors.Is(err, registry.ErrUnknownDataNode) {
		d.log.Warn("the registry does not know this DataNode: registering again before the full report")
		if id, rerr := d.reg.Register(ctx, d.heartbeat()); rerr == nil {
			d.id.Store(id)
		}
	}
	if err != nil {
		d.m.fullReportFailures.Inc()
		return err
	}
	d.setUsage(used, n)
	took := time.Since(start)
	d.m.fullReports.Inc()
	d.m.fullReportSeconds.Set(took.Seconds())
	d.log.Info("full block report", "replicas", stats.Replicas, "written", stats.Written, "deleted", stats.Deleted,
		"transactions", stats.Txns, "took", took.Round(time.Millisecond))
	return nil
}

// countUsage adds up the space the replicas take.
func (d *DataNode) countUsage(ctx context.Context) error {
	var used int64
	n := 0
	if err := d.local.Report(ctx, func(r blocks.Replica) error { used += r.DiskBytes; n++; return nil }); err != nil {
		return fmt.Errorf("datanode: count replicas: %w", err)
	}
	d.setUsage(used, n)
	return nil
}

func (d *DataNode) setUsage(used int64, n int) {
	d.mu.Lock()
	d.mu.used, d.mu.replicas = used, n
	d.mu.Unlock()
	d.m.used.Set(float64(used))
	d.m.replicas.Set(float64(n))
}

// healthz answers 200 while the DataNode's heartbeats reach the store and
// its directory passes its check, 503 with the reason otherwise.
func (d *DataNode) healthz(w http.ResponseWriter, _ *http.Request) {
	d.mu.Lock()
	last, beatErr := d.mu.lastBeat, d.mu.beatErr
	d.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := d.stor.check(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "storage directory failed: %v\n", err)
		return
	}
	if silent := time.Since(last); silent >= d.cfg.Liveness.StaleAfter {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "no heartbeat recorded for %v (last error: %v)\n", silent.Round(time.Second), beatErr)
		return
	}
	fmt.Fprintf(w, "ok datanode %d %s\n", d.id.Load(), d.stor.version.DataNodeUUID)
}
