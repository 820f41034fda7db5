// Package registry is where DataNodes publish themselves and NameNodes learn
// about them, through the metadata store that both reach (as λFS's
// DataNodes do: no NameNode needs a connection to each DataNode to know
// it).
//
// A DataNode registers (Register: its numeric id, allocated once per
// DataNode UUID and kept), beats (Heartbeat: space, transfers, flags, and
// a Beat counter moved up by one each time), and reports its replicas: a
// full report (FullReport) reconciles its replica rows with what is on its
// disk, in bounded batches; incremental reports (IncrementalReport) apply
// each change as it happens. A NameNode reads the DataNodes with their
// liveness (DataNodes, DataNode), the replicas of a block with their
// DataNodes (Replicas), and totals (Counts).
//
// Liveness is judged by each reader's own clock, never by comparing two
// machines' clocks: a DataNode whose Beat this Registry has seen move
// within Config.StaleAfter is live, one whose Beat stood still longer is
// stale (no new replicas, readers sent elsewhere first), and longer than
// Config.DeadAfter dead (its replicas no longer count). A Beat seen for the
// first time has not been seen moving: stale until it moves.
//
// The rows are store.DataNode and store.Replica (store/datanode.go,
// store/replica.go). A DataNode's replica rows are written only by its
// own reports, and its reports must not run concurrently with each other
// (the DataNode process sends them from one goroutine); heartbeats and
// the operator's SetAdminState may run at any time.
package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// Config configures a Registry. The durations are the reader's: the
// liveness it judges; the DataNodes' heartbeat period is theirs, and
// StaleAfter must leave room for several of their beats.
type Config struct {
	// Heartbeat is the DataNodes' heartbeat period (HDFS's
	// dfs.heartbeat.interval, 3 s), for Validate's checks of the others.
	Heartbeat time.Duration
	// StaleAfter: a DataNode whose Beat stood still this long is stale
	// (HDFS's dfs.namenode.stale.datanode.interval, 30 s).
	StaleAfter time.Duration
	// DeadAfter: ... and this long, dead (HDFS: 2 × the recheck interval of
	// 5 min + 10 × the heartbeat = 10 min 30 s).
	DeadAfter time.Duration
	// Batch is the most replicas one transaction of a report writes or
	// deletes (each is two rows).
	Batch int
	// Now is the reader's clock; nil: time.Now.
	Now func() time.Time
}

// DefaultConfig returns HDFS's defaults: heartbeats every 3 s, stale after
// 30 s, dead after 10 min 30 s; batches of 1,000 replicas.
func DefaultConfig() Config {
	return Config{Heartbeat: 3 * time.Second, StaleAfter: 30 * time.Second, DeadAfter: 10*time.Minute + 30*time.Second, Batch: 1000}
}

// ErrConfig is wrapped by Validate's errors.
var ErrConfig = errors.New("registry: invalid config")

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Heartbeat <= 0:
		return fmt.Errorf("%w: Heartbeat = %v, want > 0", ErrConfig, c.Heartbeat)
	case c.StaleAfter < 2*c.Heartbeat:
		return fmt.Errorf("%w: StaleAfter = %v, want at least two heartbeats (%v)", ErrConfig, c.StaleAfter, 2*c.Heartbeat)
	case c.DeadAfter <= c.StaleAfter:
		return fmt.Errorf("%w: DeadAfter = %v, want more than StaleAfter (%v)", ErrConfig, c.DeadAfter, c.StaleAfter)
	case c.Batch < 1:
		return fmt.Errorf("%w: Batch = %d, want >= 1", ErrConfig, c.Batch)
	}
	return nil
}

// Errors of the registry.
var (
	// ErrUnknownDataNode: no DataNode row with that id (or it belongs to
	// another UUID): the DataNode must register again, and send a full
	// report.
	ErrUnknownDataNode = errors.New("registry: unknown DataNode")
	// ErrBadReport: a report the registry refuses (blocks out of order, a
	// field out of its domain); nothing of the offending batch is written.
	ErrBadReport = errors.New("registry: bad report")
	// ErrBadHeartbeat: a registration or heartbeat with a field out of its
	// domain.
	ErrBadHeartbeat = errors.New("registry: bad heartbeat")
)

// Registry publishes and reads DataNodes over one store.Store. Safe for
// concurrent use.
type Registry struct {
	st  store.Store
	cfg Config

	mu   sync.Mutex
	seen map[uint64]beatSeen // what this reader saw of each DataNode's Beat
}

type beatSeen struct {
	beat  uint64
	at    time.Time // when this reader first saw beat
	first bool      // beat is the first this reader saw: no movement seen yet
}

// New returns a Registry over st.
func New(st store.Store, cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Registry{st: st, cfg: cfg, seen: map[uint64]beatSeen{}}, nil
}

// Config returns the registry's configuration.
func (r *Registry) Config() Config { return r.cfg }

// Heartbeat is what a DataNode publishes of itself, at registration and
// with every beat.
type Heartbeat struct {
	UUID      string // required: the DataNode's identity (its storage directory's datanodeUuid)
	StorageID string
	Host      string
	DataAddr  string
	HTTPAddr  string
	Zone      string
	Version   string
	Started   time.Time // the process's start

	Capacity  int64
	Used      int64
	Remaining int64
	Transfers uint32
	Replicas  int64 // replicas held, as last counted
	Full      bool
	Failed    bool
}

func (hb *Heartbeat) check() error {
	if hb.UUID == "" {
		return fmt.Errorf("%w: no UUID", ErrBadHeartbeat)
	}
	for _, f := range []struct{ name, v string }{{"UUID", hb.UUID}, {"storage id", hb.StorageID}, {"host", hb.Host},
		{"data address", hb.DataAddr}, {"HTTP address", hb.HTTPAddr}, {"zone", hb.Zone}, {"version", hb.Version}} {
		if len(f.v) > store.MaxDataNodeString {
			return fmt.Errorf("%w: %s of %d bytes (at most %d)", ErrBadHeartbeat, f.name, len(f.v), store.MaxDataNodeString)
		}
	}
	if hb.Capacity < 0 || hb.Used < 0 || hb.Remaining < 0 {
		return fmt.Errorf("%w: negative space (capacity %d, used %d, remaining %d)", ErrBadHeartbeat, hb.Capacity, hb.Used, hb.Remaining)
	}
	return nil
}

// apply writes hb's fields into row, leaving ID, Admin and Beat.
func (hb *Heartbeat) apply(row *store.DataNode, now time.Time) {
	row.UUID, row.StorageID, row.Host = hb.UUID, hb.StorageID, hb.Host
	row.DataAddr, row.HTTPAddr, row.Zone, row.Version = hb.DataAddr, hb.HTTPAddr, hb.Zone, hb.Version
	row.Capacity, row.Used, row.Remaining, row.Transfers = hb.Capacity, hb.Used, hb.Remaining, hb.Transfers
	row.Replicas = hb.Replicas
	row.Full, row.Failed = hb.Full, hb.Failed
	if !hb.Started.IsZero() {
		row.Started = hb.Started.UnixMilli()
	}
	row.Updated = now.UnixMilli()
}

// Register records the DataNode hb describes and returns its id: the id
// its UUID was given at its first registration, or a new one from the
// store's DataNode counter. The row's Beat moves on (a restarted DataNode
// is seen beating at once) and its admin state is kept.
func (r *Registry) Register(ctx context.Context, hb Heartbeat) (uint64, error) {
	if err := hb.check(); err != nil {
		return 0, err
	}
	for attempt := 0; ; attempt++ {
		id, err := r.register(ctx, &hb)
		if err == nil {
			return id, nil
		}
		if attempt < 5 && store.IsRetryable(err) {
			continue // two registrations of one UUID raced: the second finds the first's id
		}
		return 0, fmt.Errorf("registry: register DataNode %s: %w", hb.UUID, err)
	}
}

func (r *Registry) register(ctx context.Context, hb *Heartbeat) (uint64, error) {
	ukey := store.DataNodeUUIDKey(hb.UUID)
	id, err := r.lookupUUID(ctx, ukey)
	if err != nil {
		return 0, err
	}
	isNew := id == 0
	if isNew {
		if id, err = r.st.AllocateIDs(ctx, store.CounterDataNode, 1); err != nil {
			return 0, err
		}
	}
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer txn.Rollback()
	key := store.DataNodeKey(id)
	// Key order: 'k' before 'u'.
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}, {Key: ukey, Mode: store.Exclusive}})
	if err != nil {
		return 0, err
	}
	if isNew && vals[1] != nil {
		return 0, fmt.Errorf("%w: UUID registered meanwhile", store.ErrConflict)
	}
	var row store.DataNode
	if vals[0] != nil {
		if err := store.DecodeDataNode(key, vals[0], &row); err != nil {
			return 0, err
		}
	}
	row.ID = id
	hb.apply(&row, time.Now())
	row.Beat++
	if isNew {
		insert(txn, ukey, store.EncodeDataNodeID(id))
	}
	txn.Put(key, store.EncodeDataNode(nil, &row))
	return id, txn.Commit(ctx)
}

// insert is Insert where the store has it (a row created twice is then a
// conflict, not an overwrite), else Put.
func insert(txn store.Txn, key, value []byte) {
	if ins, ok := txn.(store.Inserter); ok {
		ins.Insert(key, value)
		return
	}
	txn.Put(key, value)
}

func (r *Registry) lookupUUID(ctx context.Context, ukey []byte) (uint64, error) {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: ukey}})
	if err != nil || vals[0] == nil {
		return 0, err
	}
	return store.DecodeDataNodeID(ukey, vals[0])
}

// Heartbeat publishes hb for DataNode id and moves its Beat on. It fails
// with ErrUnknownDataNode when the row is gone or is another UUID's: the
// DataNode must register again.
func (r *Registry) Heartbeat(ctx context.Context, id uint64, hb Heartbeat) error {
	if err := hb.check(); err != nil {
		return err
	}
	err := r.update(ctx, id, func(row *store.DataNode) error {
		if row.UUID != hb.UUID {
			return fmt.Errorf("%w: DataNode %d is %s, not %s", ErrUnknownDataNode, id, row.UUID, hb.UUID)
		}
		hb.apply(row, time.Now())
		row.Beat++
		return nil
	})
	if err != nil {
		return fmt.Errorf("registry: heartbeat of DataNode %d (%s): %w", id, hb.UUID, err)
	}
	return nil
}

// SetAdminState records an operator's decision about DataNode id; its
// heartbeats keep it.
func (r *Registry) SetAdminState(ctx context.Context, id uint64, a store.AdminState) error {
	if a > store.AdminDecommissioned {
		return fmt.Errorf("registry: set admin state of DataNode %d: unknown state %d", id, a)
	}
	err := r.update(ctx, id, func(row *store.DataNode) error { row.Admin = a; return nil })
	if err != nil {
		return fmt.Errorf("registry: set admin state of DataNode %d to %v: %w", id, a, err)
	}
	return nil
}

// update changes DataNode id's row under its exclusive lock.
func (r *Registry) update(ctx context.Context, id uint64, fn func(*store.DataNode) error) error {
	for attempt := 0; ; attempt++ {
		err := r.updateOnce(ctx, id, fn)
		if err != nil && attempt < 3 && store.IsRetryable(err) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

func (r *Registry) updateOnce(ctx context.Context, id uint64, fn func(*store.DataNode) error) error {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	key := store.DataNodeKey(id)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}})
	if err != nil {
		return err
	}
	if vals[0] == nil {
		return ErrUnknownDataNode
	}
	var row store.DataNode
	if err := store.DecodeDataNode(key, vals[0], &row); err != nil {
		return err
	}
	if err := fn(&row); err != nil {
		return err
	}
	txn.Put(key, store.EncodeDataNode(nil, &row))
	return txn.Commit(ctx)
}

// Forget removes DataNode id: its replica rows (in transactions of at most
// Config.Batch replicas), then its row and its UUID's. For a DataNode gone
// for good; the caller decides that (one judged Dead, say). A DataNode
// that is in fact running finds its row gone at its next heartbeat,
// registers again under a new id and sends a full report, so nothing is
// lost but the id. Forgetting an unknown id is not an error.
func (r *Registry) Forget(ctx context.Context, id uint64) error {
	for {
		txn, err := r.st.Begin(ctx)
		if err != nil {
			return fmt.Errorf("registry: forget DataNode %d: %w", id, err)
		}
		var blocks []uint64
		start, end := store.ReplicasOfNodeRange(id, 0)
		err = txn.Scan(ctx, start, end, r.cfg.Batch, func(k, _ []byte) bool {
			if _, b, ok := store.DecodeNodeReplicaKey(k); ok {
				blocks = append(blocks, b)
			}
			return true
		})
		if err == nil && len(blocks) == 0 {
			txn.Rollback()
			break
		}
		for _, b := range blocks {
			txn.Delete(store.ReplicaKey(b, id))
			txn.Delete(store.NodeReplicaKey(id, b))
		}
		if err == nil {
			err = txn.Commit(ctx)
		}
		txn.Rollback()
		if err != nil {
			return fmt.Errorf("registry: forget DataNode %d: %w", id, err)
		}
	}
	err := r.forgetRow(ctx, id)
	if err != nil {
		return fmt.Errorf("registry: forget DataNode %d: %w", id, err)
	}
	r.mu.Lock()
	delete(r.seen, id)
	r.mu.Unlock()
	return nil
}

func (r *Registry) forgetRow(ctx context.Context, id uint64) error {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	key := store.DataNodeKey(id)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}})
	if err != nil || vals[0] == nil {
		return err
	}
	var row store.DataNode
	if err := store.DecodeDataNode(key, vals[0], &row); err != nil {
		return err
	}
	txn.Delete(key)
	ukey := store.DataNodeUUIDKey(row.UUID)
	uv, err := txn.Read(ctx, []store.ReadReq{{Key: ukey, Mode: store.Exclusive}})
	if err != nil {
		return err
	}
	if uv[0] != nil {
		if uid, err := store.DecodeDataNodeID(ukey, uv[0]); err == nil && uid == id {
			txn.Delete(ukey)
		}
	}
	return txn.Commit(ctx)
}
