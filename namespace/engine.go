package namespace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os/user"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/nimbus-fs/nimbus/store"
)

// Engine is the namespace engine. It implements meta.FileSystem and is safe for
// concurrent use. It owns no goroutine except the lease monitor (unless
// Config.LeaseMonitor is off) and, on a shared store, the heartbeat.
type Engine struct {
	cfg     Config
	st      store.Store
	log     *slog.Logger
	hints   *hints
	cache   *cache.Cache // nil: reads go to the store (read_cache.go)
	inv     Invalidator  // nil: writes compute no invalidation targets (invalidate.go)
	metrics *metrics
	leases  *leaseTable
	blocks  blocks.Store // nil: every file is inline

	ids      idRange // inode ids
	blockIDs idRange // block ids
	writers  writers // open block writers of files under construction

	// instance names this incarnation of the engine in the subtree flags it
	// sets: a flag naming another is stale (its owner is gone).
	instance uint64
	subtrees struct {
		sync.Mutex
		t subtree.Table // the subtree operations under way
	}
	grace grace // the attempts in flight, for the quiesce (grace.go)
	// alone: the store is the engine's alone (store.SingleProcess), so the
	// quiesce need not lock the rows of a subtree to wait for operations.
	alone bool
	// members: the other engines on a shared store (members.go); nil alone.
	members *members
	// marks: the store's marks of resubmitted requests (store.KeyMarker,
	// once.go), nil when it keeps none.
	marks *store.KeyMarks
	// liveness: the second source of the others' liveness (members.go).
	liveness atomic.Pointer[Liveness]
	groups   struct {
		sync.Mutex
		m map[string]groupEntry
	}

	stop chan struct{}
	done chan struct{}
	once sync.Once

	// testHookCommit, when set (by a test, while no operation runs), runs in
	// every attempt that writes, after its reads and before its commit, with
	// its locks held.
	testHookCommit func()
	// testHookFlag, when set (by a test, while no operation runs), runs in
	// a subtree operation before it sets its flag (set false) and once the
	// flag is committed, before its quiesce (set true).
	testHookFlag func(set bool)
}

type groupEntry struct {
	groups []string
	at     time.Time
}

var _ meta.FileSystem = (*Engine)(nil)

// New opens the namespace kept in st, creating the root directory on first
// use, and starts the lease monitor. The caller keeps ownership of st: Close
// the Engine before the store.
func New(st store.Store, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Groups == nil {
		cfg.Groups = osGroups
	}
	e := &Engine{
		cfg:     cfg,
		st:      st,
		log:     cfg.Logger.With("component", "namespace"),
		hints:   newHints(cfg.HintCacheEntries),
		metrics: newMetrics(cfg.Registerer),
		leases:  newLeaseTable(cfg.Now()),
		blocks:  cfg.Blocks,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	e.cache, e.inv = cfg.Cache, cfg.Invalidator
	if e.inv == nil && e.cache != nil {
		e.inv = localInvalidator{e.cache}
	}
	for e.instance == 0 {
		e.instance = rand.Uint64()
	}
	_, e.alone = st.(store.SingleProcess)
	if km, ok := st.(store.KeyMarker); ok {
		e.marks = km.KeyMarks()
	}
	if cfg.CheckOnly {
		// Not a NameNode of the cluster: no instance row, no heartbeat.
		e.alone = true
		close(e.done)
		return e, nil
	}
	if !e.alone {
		e.members = newMembers()
	}
	e.groups.m = make(map[string]groupEntry)
	e.writers.m = make(map[uint64]*fileWriter)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.bootstrap(ctx); err != nil {
		return nil, err
	}
	if !e.alone {
		if err := e.register(ctx); err != nil {
			return nil, fmt.Errorf("namespace: registering this NameNode's instance: %w", err)
		}
	}
	// Not under the minute of bootstrap: a recursive delete left half done
	// is finished here, however big.
	if err := e.recoverSubtreeOps(context.Background()); err != nil {
		return nil, err
	}
	if cfg.LeaseMonitor {
		go e.leaseMonitor()
	} else {
		close(e.done)
	}
	if !e.alone {
		go e.heartbeat()
	}
	return e, nil
}

// Close stops the lease monitor. It does not close the store.
func (e *Engine) Close() error {
	e.once.Do(func() { close(e.stop) })
	<-e.done
	if e.members != nil {
		<-e.members.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := e.deregister(ctx); err != nil {
			e.log.Warn("removing this NameNode's instance row; the others judge it gone after GoneAfter", "err", err)
		}
		cancel()
	}
	// Open block streams stop; their replicas stay being written, and lease
	// recovery takes them up after a restart.
	e.writers.Lock()
	ids := make([]uint64, 0, len(e.writers.m))
	for id := range e.writers.m {
		ids = append(ids, id)
	}
	e.writers.Unlock()
	for _, id := range ids {
		e.writers.drop(id)
	}
	return nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Instance is the id of this incarnation of the engine, the owner named in
// the subtree flags it sets (and the coordinator member ID the server
// registers it under, so that liveness can later be asked of the
// coordinator instead of the instance table).
func (e *Engine) Instance() uint64 { return e.instance }

// bootstrap creates the root inode if the store has none.
func (e *Engine) bootstrap(ctx context.Context) error {
	// The root, once created, is never removed: a read without a lock
	// finds it in one round trip on every start but the first, instead of
	// a locking transaction's three (a platform instance's cold start
	// pays them). Only a missing root takes the lock.
	if err := e.bootstrapWith(ctx, store.ReadCommitted); !errors.Is(err, errNoRoot) {
		return err
	}
	return e.bootstrapWith(ctx, store.Exclusive)
}

// errNoRoot: bootstrapWith read no root without a lock.
var errNoRoot = errors.New("namespace: no root yet")

func (e *Engine) bootstrapWith(ctx context.Context, mode store.Mode) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return fmt.Errorf("namespace: bootstrap: %w", err)
	}
	defer txn.Rollback()
	key := store.InodeKey(store.RootParentID, "")
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: mode}})
	if err != nil {
		return fmt.Errorf("namespace: bootstrap: %w", err)
	}
	if vals[0] != nil {
		var root store.Inode
		if err := store.DecodeInode(key, vals[0], &root); err != nil {
			return fmt.Errorf("namespace: bootstrap: %w", err)
		}
		if root.ID != store.RootID || root.Type != meta.TypeDir {
			return fmt.Errorf("namespace: bootstrap: %w: root row has id %d type %v", store.ErrCorrupt, root.ID, root.Type)
		}
		return nil
	}
	if mode == store.ReadCommitted {
		return errNoRoot
	}
	now := e.cfg.Now().UnixMilli()
	root := &store.Inode{Parent: store.RootParentID, ID: store.RootID, Type: meta.TypeDir,
		Perm: meta.DefaultDir, Owner: e.cfg.Superuser, Group: e.cfg.Supergroup,
		Mtime: now, Atime: now, NsQuota: -1, SpaceQuota: -1}
	txn.Put(key, store.EncodeInode(nil, root))
	if err := txn.Commit(ctx); err != nil {
		return fmt.Errorf("namespace: bootstrap: %w", err)
	}
	e.log.Info("created the root directory", "owner", root.Owner, "group", root.Group)
	return nil
}

// newID returns a fresh inode id, reserving ids from the store in batches.
func (e *Engine) newID(ctx context.Context) (uint64, error) {
	return e.ids.next(ctx, e.st, store.CounterInode, e.cfg.IDBatch)
}

// newBlockID returns a fresh block id.
func (e *Engine) newBlockID(ctx context.Context) (uint64, error) {
	return e.blockIDs.next(ctx, e.st, store.CounterBlock, e.cfg.IDBatch)
}

// idRange hands out ids from a batch reserved in the store.
type idRange struct {
	mu       sync.Mutex
	nxt, end uint64
}

func (r *idRange) next(ctx context.Context, st store.Store, counter string, batch uint64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nxt >= r.end {
		first, err := st.AllocateIDs(ctx, counter, batch)
		if err != nil {
			return 0, err
		}
		r.nxt, r.end = first, first+batch
		if r.nxt <= store.RootID {
			r.nxt = store.RootID + 1 // never hand out the root's id (or 0)
		}
		if r.nxt >= r.end {
			return 0, errors.New("namespace: IDBatch too small")
		}
	}
	id := r.nxt
	r.nxt++
	return id, nil
}

// identity returns the caller's groups and whether it is a superuser.
func (e *Engine) identity(name string) ([]string, bool) {
	e.groups.Lock()
	g, ok := e.groups.m[name]
	e.groups.Unlock()
	now := time.Now()
	if !ok || now.Sub(g.at) > 5*time.Minute {
		g = groupEntry{groups: e.cfg.Groups(name), at: now}
		e.groups.Lock()
		e.groups.m[name] = g
		e.groups.Unlock()
	}
	super := name == e.cfg.Superuser || slices.Contains(g.groups, e.cfg.Supergroup)
	return g.groups, super
}

// osGroups asks the operating system for a user's groups; an unknown user
// has none.
func osGroups(name string) []string {
	u, err := user.Lookup(name)
	if err != nil {
		return nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if g, err := user.LookupGroupId(id); err == nil {
			out = append(out, g.Name)
		}
	}
	return out
}

// status converts an inode row to the contract's FileStatus.
func status(path string, n *store.Inode) *meta.FileStatus {
	s := &meta.FileStatus{}
	fillStatus(s, path, n)
	return s
}

func fillStatus(s *meta.FileStatus, path string, n *store.Inode) {
	*s = meta.FileStatus{
		Path: path, FileID: n.ID, Type: n.Type, Perm: n.Perm, Owner: n.Owner, Group: n.Group,
		Length: n.Length, Mtime: n.Mtime, Atime: n.Atime, Symlink: n.Symlink,
		UnderConstruction: n.UnderConstruction(), NsQuota: -1, SpaceQuota: -1,
		AclBit: n.ACL != "",
	}
	switch n.Type {
	case meta.TypeFile:
		s.Replication = n.Replication
		s.BlockSize = n.BlockSize
	case meta.TypeDir:
		s.ChildrenNum = n.Children
		s.NsQuota = n.NsQuota
		s.SpaceQuota = n.SpaceQuota
	}
}

// Defaults implements meta.FileSystem.
func (e *Engine) Defaults(context.Context) (*meta.ServerDefaults, error) {
	return &meta.ServerDefaults{
		BlockSize:        e.cfg.DefaultBlockSize,
		Replication:      e.cfg.DefaultReplication,
		InlineThreshold:  e.cfg.InlineThreshold,
		LeaseSoftLimitMs: e.cfg.LeaseSoftLimit.Milliseconds(),
		LeaseHardLimitMs: e.cfg.LeaseHardLimit.Milliseconds(),
	}, nil
}

// clean validates a path for op. HDFS's /.reserved/raw/P names /P: a read
// through it is cleaned to /P here (HDFS lets any user read through it);
// other operations are refused, but the attribute ones, which resolve it
// themselves (rawPath) to check the superuser and see raw.* attributes.
// /.reserved cannot be created (nor anything under it), deleted or renamed,
// with HDFS's words; other /.reserved names are ordinary, missing paths.
func clean(op, p string) (string, error) {
	p, err := meta.CleanPath(op, p)
	if err != nil || len(p) < len(reservedDir) || p[1] != '.' || !strings.HasPrefix(p, reservedDir) {
		return p, err
	}
	rest := p[len(reservedDir):]
	if rest != "" && rest[0] != '/' {
		return p, nil // /.reservedX: an ordinary name
	}
	if rest == rawDir || strings.HasPrefix(rest, rawDir+"/") {
		if !readOps[op] {
			return "", meta.Errorf(op, p, meta.ErrUnsupported, "only reads and xattr operations are supported under %s", reservedDir+rawDir)
		}
		if rest = rest[len(rawDir):]; rest == "" {
			return meta.RootPath, nil
		}
		return rest, nil
	}
	switch {
	case op == "mkdirs" || op == "create symlink":
		// FSDirectory.addLastINode's words (mkdirs -p makes /.reserved first).
		return "", meta.Errorf(op, p, meta.ErrInvalidArgument, "File name \"%s\" is reserved and cannot be created. "+
			"If this is during upgrade change the name of the existing file or directory to another name before upgrading to the new release.", reservedDir[1:])
	case op == "create", op == "delete" && rest == "":
		return "", meta.Errorf(op, p, meta.ErrInvalidPath, "Invalid path name %s", p)
	case op == "rename" && rest == "":
		return "", meta.Errorf(op, p, meta.ErrInvalidPath, "Cannot rename to or from %s", reservedDir)
	}
	return p, nil
}

const (
	reservedDir = "/.reserved"
	rawDir      = "/raw"
)

// readOps are the operations HDFS resolves as DirOp.READ, which a
// /.reserved/raw path lets any user make.
var readOps = map[string]bool{
	"stat": true, "list": true, "read": true, "content summary": true,
	"check access": true, "get acl status": true,
}
