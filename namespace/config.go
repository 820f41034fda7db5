package namespace

import (
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
)

// Config configures an Engine. Start from DefaultConfig.
type Config struct {
	// Superuser is the user with every right, HDFS's "user who started the
	// NameNode". Members of Supergroup are superusers too.
	Superuser  string
	Supergroup string
	// Groups resolves a user's groups. The default asks the operating system
	// (HDFS's ShellBasedUnixGroupsMapping) and caches the answer.
	Groups func(user string) []string

	// InlineThreshold is the largest file, in bytes, whose content is kept in
	// the store beside its inode (HopsFS-CL's small files). Until block storage
	// exists it is also the largest file there can be.
	InlineThreshold int64
	// ChunkSize is the size of one content row of an inline file.
	ChunkSize int
	// DefaultBlockSize and DefaultReplication apply when a create gives none.
	DefaultBlockSize   int64
	DefaultReplication uint16
	// MinBlockSize is the smallest block size a create may ask for (HDFS's
	// dfs.namenode.fs-limits.min-block-size; 0: no minimum) and
	// MaxBlocksPerFile the most blocks one file may have (HDFS's
	// dfs.namenode.fs-limits.max-blocks-per-file). Together they bound the
	// block files and rows one client can make: a 588 KB file written with
	// 1-byte blocks made 395,000 blocks before these limits existed.
	MinBlockSize     int64
	MaxBlocksPerFile int
	MaxReplication   uint16
	// ListLimit caps the entries of one listing page (HDFS's dfs.ls.limit).
	ListLimit int

	// LeaseSoftLimit: after it another client may take over a file by
	// recovering the lease. LeaseHardLimit: after it the engine recovers the
	// file by itself. LeaseCheckInterval is how often it looks.
	LeaseSoftLimit     time.Duration
	LeaseHardLimit     time.Duration
	LeaseCheckInterval time.Duration
	// LeaseMonitor: the engine runs its own lease monitor from New to
	// Close. False: it runs none, and its owner calls RunLeaseMonitor
	// where it should run (`nimbus serve` does, while it leads the
	// coordinator's "lease-monitor" election, so that one NameNode of those
	// sharing a store recovers leases).
	LeaseMonitor bool
	// CheckOnly opens the namespace only to check it (Fsck) from outside
	// the servers, as `nimbus fsck --store` does: New writes nothing (no
	// root, no instance row, no finishing of subtree operations left half
	// done, which are the servers' to finish) and starts no background work.
	// Other operations must not be called.
	CheckOnly bool

	// MaxXAttrsPerInode and MaxXAttrSize are HDFS's
	// dfs.namenode.fs-limits.max-xattrs-per-inode and max-xattr-size: the
	// most extended attributes one inode may have, and the largest one
	// (its name without the namespace prefix plus its value, in bytes).
	MaxXAttrsPerInode int
	MaxXAttrSize      int

	// HintCacheEntries bounds the inode hint cache.
	HintCacheEntries int
	// MaxAttempts bounds how often one operation restarts after a stale hint
	// or a busy lock before it fails with meta.ErrBusy.
	MaxAttempts int
	// SubtreeWait bounds how long an operation waits for a subtree
	// operation (a move, chmod or chown of a non-empty directory) under way
	// on its path, or overlapping it, before it fails with meta.ErrBusy.
	SubtreeWait time.Duration
	// Beat is how often an engine on a store that others share counts up
	// its instance row (members.go), and looks for the flags of engines that
	// stopped beating. GoneAfter is how long another engine's count may
	// stand still, by this engine's clock, before it is judged gone: its
	// subtree flags are then cleared and its half-done recursive deletes
	// finished. Unused on a store that is the engine's alone.
	Beat      time.Duration
	GoneAfter time.Duration
	// SubtreeDeleteBatch bounds the inodes one transaction of a recursive
	// delete removes (ops_delete.go): each is one WAL sync, and holds its
	// rows in memory until it commits.
	SubtreeDeleteBatch int
	// IDBatch is how many inode ids are reserved from the store at a time.
	IDBatch uint64

	// RequestTTL is how long the record of a write sent with a request id
	// (meta.Request, from the context) is kept in the store at least: a
	// resubmission of the write within it, to any NameNode on the store,
	// is answered from the record instead of being applied again
	// (once.go). 0 switches duplicate detection off (no record is read or
	// written: a resubmitted write is applied again, as in the λFS
	// prototype). RequestSweep is how often the expired records are
	// deleted, so a record lives between RequestTTL and RequestTTL +
	// RequestSweep.
	RequestTTL   time.Duration
	RequestSweep time.Duration

	// Blocks keeps the content of files larger than InlineThreshold (nil:
	// such files are refused). The engine owns the block rows; Blocks the
	// bytes. SyncEvery is how many bytes a block writer takes between
	// syncs: a crash loses at most that much of a file being written, which
	// lease recovery then cuts off (bytes are durable for sure at close).
	Blocks    blocks.Store
	SyncEvery int64

	// HoldMemory, when set, is called as a subtree operation's work starts
	// (a recursive delete, chmod or chown -R, set-quota, a move) and its
	// result when the work ends; calls may overlap. The server bounds the
	// Go heap's growth there (internal/gctune.HoldHeap): the work's garbage
	// would otherwise grow the heap to its GOGC goal. Nil: nothing.
	HoldMemory func() (release func())

	// Cache is this instance's metadata cache (package cache): stats and
	// listings of cached paths are answered from it without a store round
	// trip, and every write invalidates what it changes through
	// Invalidator. Nil: no cache (the default; docs/ELASTIC.md, "The
	// cache in the engine"). A cache serves one engine; with several
	// engines on one store it is coherent only with an Invalidator that
	// reaches them all (coherence/loop) and CacheServing.
	Cache *cache.Cache
	// Invalidator receives the invalidation targets of every write before
	// its commit (invalidate.go). Nil with a Cache: the cache itself, held
	// locally. Nil without one: no targets are computed.
	Invalidator Invalidator
	// Deployment and Deployments: this instance belongs to deployment
	// Deployment of the Deployments (0 or 1: one) that share the
	// namespace, and its cache fills only the entries its deployment owns
	// (ownership.go), besides directory rows; a write's targets say which
	// deployment caches each. Every instance on one store must be given
	// the same Deployments.
	Deployment, Deployments int
	// DisableFillOwnership fills every entry whatever deployment owns it,
	// while targets stay classified: for the test that shows the rule is
	// what makes owned (not Everywhere) targets sound, only.
	DisableFillOwnership bool
	// DisableInvalidation computes the targets but sends none: for the
	// tests that show a stale cache is caught, only.
	DisableInvalidation bool
	// CacheServing, if set, says whether the cache may answer reads and
	// install fills now: the coherence layer's Serving (the instance's
	// session deadline is ahead and its join is complete; coherence/doc.go).
	// Called on every cached read and at both ends of every fill, from
	// many goroutines: it must be cheap and safe for concurrent use. Nil:
	// always.
	CacheServing func() bool

	// Now is the clock (injected so that tests control it).
	Now func() time.Time
	// Logger and Registerer may be nil.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// DefaultConfig returns a Config with the defaults of a single-machine Nimbus:
// the current OS user is the superuser, as when HDFS's NameNode starts.
func DefaultConfig() Config {
	su := "root"
	if u, err := user.Current(); err == nil && u.Username != "" {
		su = u.Username
	}
	return Config{
		Superuser:          su,
		Supergroup:         "supergroup",
		InlineThreshold:    128 << 10,
		ChunkSize:          64 << 10,
		DefaultBlockSize:   128 << 20,
		DefaultReplication: 1,
		MinBlockSize:       1 << 20,
		MaxBlocksPerFile:   10000,
		MaxReplication:     512,
		ListLimit:          1000,
		LeaseSoftLimit:     60 * time.Second,
		LeaseHardLimit:     20 * time.Minute,
		LeaseCheckInterval: 2 * time.Second,
		LeaseMonitor:       true,
		MaxXAttrsPerInode:  meta.MaxXAttrsPerInode,
		MaxXAttrSize:       meta.MaxXAttrSize,
		HintCacheEntries:   1 << 20,
		MaxAttempts:        64,
		SubtreeWait:        30 * time.Second,
		Beat:               time.Second,
		GoneAfter:          10 * time.Second,
		SubtreeDeleteBatch: 8192,
		IDBatch:            1024,
		RequestTTL:         5 * time.Minute,
		RequestSweep:       time.Minute,
		SyncEvery:          8 << 20,
		Now:                time.Now,
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Superuser == "":
		return errors.New("namespace: Superuser is empty")
	case c.Deployments < 0 || c.Deployment < 0 || c.Deployment >= max(c.Deployments, 1):
		return fmt.Errorf("namespace: Deployment %d of %d deployments", c.Deployment, c.Deployments)
	case c.InlineThreshold < 0:
		return fmt.Errorf("namespace: InlineThreshold %d < 0", c.InlineThreshold)
	case c.ChunkSize <= 0:
		return fmt.Errorf("namespace: ChunkSize %d <= 0", c.ChunkSize)
	case c.DefaultBlockSize <= 0:
		return fmt.Errorf("namespace: DefaultBlockSize %d <= 0", c.DefaultBlockSize)
	case c.MinBlockSize < 0 || c.DefaultBlockSize < c.MinBlockSize:
		return fmt.Errorf("namespace: MinBlockSize %d not in [0, DefaultBlockSize %d]", c.MinBlockSize, c.DefaultBlockSize)
	case c.MaxBlocksPerFile <= 0:
		return fmt.Errorf("namespace: MaxBlocksPerFile %d <= 0", c.MaxBlocksPerFile)
	case c.DefaultReplication == 0 || c.DefaultReplication > c.MaxReplication:
		return fmt.Errorf("namespace: DefaultReplication %d not in 1..%d", c.DefaultReplication, c.MaxReplication)
	case c.ListLimit <= 0:
		return fmt.Errorf("namespace: ListLimit %d <= 0", c.ListLimit)
	case c.LeaseSoftLimit <= 0 || c.LeaseHardLimit < c.LeaseSoftLimit:
		return fmt.Errorf("namespace: lease limits soft %v hard %v", c.LeaseSoftLimit, c.LeaseHardLimit)
	case c.LeaseCheckInterval <= 0:
		return fmt.Errorf("namespace: LeaseCheckInterval %v <= 0", c.LeaseCheckInterval)
	case c.MaxXAttrsPerInode < 0:
		return fmt.Errorf("namespace: MaxXAttrsPerInode %d < 0", c.MaxXAttrsPerInode)
	case c.MaxXAttrSize <= 0 || c.MaxXAttrSize > 32768:
		return fmt.Errorf("namespace: MaxXAttrSize %d not in 1..32768 (HDFS's hard limit)", c.MaxXAttrSize)
	case c.MaxAttempts <= 0:
		return fmt.Errorf("namespace: MaxAttempts %d <= 0", c.MaxAttempts)
	case c.SubtreeDeleteBatch < 1:
		return fmt.Errorf("namespace: SubtreeDeleteBatch %d < 1", c.SubtreeDeleteBatch)
	case c.SubtreeWait <= 0:
		return fmt.Errorf("namespace: SubtreeWait %v <= 0", c.SubtreeWait)
	case c.Beat <= 0 || c.GoneAfter < 3*c.Beat:
		return fmt.Errorf("namespace: Beat %v and GoneAfter %v: want Beat > 0 and GoneAfter at least 3 beats", c.Beat, c.GoneAfter)
	case c.IDBatch == 0:
		return errors.New("namespace: IDBatch is 0")
	case c.RequestTTL < 0 || (c.RequestTTL > 0 && c.RequestSweep <= 0):
		return fmt.Errorf("namespace: RequestTTL %v and RequestSweep %v: want RequestTTL >= 0 and, when on, RequestSweep > 0", c.RequestTTL, c.RequestSweep)
	case c.Now == nil:
		return errors.New("namespace: Now is nil")
	}
	return nil
}
