package lockmgr

import (
	"bytes"
	"hash/maphash"
	"log/slog"
	"sync"

	"github.com/nimbus-fs/nimbus/store"
)

// Manager is a lock table. It is safe for concurrent use; each transaction
// talks to it through its own Owner.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	seed    maphash.Seed
	mask    uint64
	shards  []shard
	owners  sync.Pool
}

// shard is one partition of the lock table. Entries whose key hashes collide
// are chained through entry.next.
type shard struct {
	mu    sync.Mutex
	table map[uint64]*entry
	free  *entry // recycled entries, chained through next
	_     [64]byte
}

// entry is the lock state of one key. Exactly one of shared > 0 and
// excl != nil holds while the key is locked.
type entry struct {
	hash   uint64
	key    []byte
	next   *entry
	shared int    // number of shared holders
	excl   *Owner // the exclusive holder
	head   *waiter
	tail   *waiter
}

func (e *entry) idle() bool { return e.shared == 0 && e.excl == nil && e.head == nil }

// New returns a Manager, or an error wrapping ErrConfig or a registration
// error from cfg.Registerer.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		cfg:     cfg,
		log:     log,
		metrics: met,
		seed:    maphash.MakeSeed(),
		mask:    uint64(cfg.Shards - 1),
		shards:  make([]shard, cfg.Shards),
	}
	for i := range m.shards {
		m.shards[i].table = make(map[uint64]*entry, 64)
	}
	m.owners.New = func() any {
		o := &Owner{m: m}
		o.w.o = o
		o.w.ch = make(chan struct{}, 1)
		return o
	}
	return m, nil
}

// Unregister removes the manager's metrics from Config.Registerer, so that a
// new Manager can register on it (a store reopened in the same process). The
// manager keeps working; its metrics are no longer exported.
func (m *Manager) Unregister() { m.metrics.unregister() }

// Owner returns the per-transaction lock state, holding nothing. The caller
// must call Release exactly once when the transaction ends.
func (m *Manager) Owner() *Owner {
	return m.owners.Get().(*Owner)
}

func (m *Manager) shardOf(key []byte) (*shard, uint64) {
	h := maphash.Bytes(m.seed, key)
	return &m.shards[h&m.mask], h
}

func (s *shard) find(h uint64, key []byte) *entry {
	e := s.table[h]
	for e != nil && !bytes.Equal(e.key, key) {
		e = e.next
	}
	return e
}

func (s *shard) insert(h uint64, key []byte) *entry {
	e := s.free
	if e != nil {
		s.free = e.next
	} else {
		e = &entry{}
	}
	e.hash = h
	e.key = append(e.key[:0], key...)
	e.next = s.table[h]
	s.table[h] = e
	return e
}

// remove unlinks an idle entry and recycles it.
func (s *shard) remove(e *entry) {
	first := s.table[e.hash]
	if first == e {
		if e.next == nil {
			delete(s.table, e.hash)
		} else {
			s.table[e.hash] = e.next
		}
	} else {
		q := first
		for q.next != e {
			q = q.next
		}
		q.next = e.next
	}
	if cap(e.key) > 1024 {
		e.key = nil // do not pin unusually large keys
	}
	e.next = s.free
	s.free = e
}

// compatible reports whether mode can be granted to a new (non-upgrading)
// requester given the current holders, ignoring the queue.
func (e *entry) compatible(mode store.Mode) bool {
	if mode == store.Shared {
		return e.excl == nil
	}
	return e.excl == nil && e.shared == 0
}

// grantWaiters grants the longest run of compatible waiters at the head of
// the queue, in FIFO order. It is called with the shard locked whenever a
// holder leaves or a waiter gives up.
func (e *entry) grantWaiters() {
	for w := e.head; w != nil; w = e.head {
		switch {
		case w.upgrade:
			if e.excl != nil || e.shared != 1 {
				return
			}
			e.shared, e.excl = 0, w.o
		case w.mode == store.Shared:
			if e.excl != nil {
				return
			}
			e.shared++
		default:
			if e.excl != nil || e.shared > 0 {
				return
			}
			e.excl = w.o
		}
		e.unlink(w)
		w.granted = true
		w.ch <- struct{}{} // buffered 1, drained before each wait: never blocks
	}
}

func (e *entry) pushBack(w *waiter) {
	w.prev, w.next = e.tail, nil
	if e.tail != nil {
		e.tail.next = w
	} else {
		e.head = w
	}
	e.tail = w
}

func (e *entry) pushFront(w *waiter) {
	w.prev, w.next = nil, e.head
	if e.head != nil {
		e.head.prev = w
	} else {
		e.tail = w
	}
	e.head = w
}

func (e *entry) unlink(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		e.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		e.tail = w.prev
	}
	w.prev, w.next = nil, nil
}
