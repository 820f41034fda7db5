package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/meta"
	nstore "github.com/nimbus-fs/nimbus/store"
)

// Timing of the simulated world, in true nanoseconds unless named local.
const (
	tick       = int64(5 * time.Millisecond)  // each instance's Tick period
	retry      = 10 * time.Millisecond        // coherence.Config.Retry
	margin     = int64(20 * time.Millisecond) // session deadline margin
	joinRetry  = int64(50 * time.Millisecond) // a join request unanswered is sent again
	think      = int64(1 * time.Millisecond)  // a client's pause between operations, at most
	opTimeout  = int64(2 * time.Second)       // a client gives up
	partMean   = 2 * time.Second              // mean time between partitions
	crashMean  = 3 * time.Second              // mean time between crashes
	slowChance = 0.03                         // a message is slow (up to 40 ms)
	cutChance  = 0.01                         // a writer is cut off just as it sends its commit
	lossChance = 0.01
	dupChance  = 0.005
)

// Stats counts what a run did.
type Stats struct {
	Ops, Reads, Writes, Subtrees int
	CacheHits, Fills, Installs   int
	WritesFailed, Timeouts       int
	Messages, Dropped            int
	Partitions, Crashes, Lost    int // Lost: sessions that ran out (the instance rejoined)
	Events                       int
	SimTime                      time.Duration
}

// world is one simulated world: instances with coherence cores and real
// caches, clients, a store, a coordinator and a network, all driven from
// one seed. Run builds one and runs it to the end.
type world struct {
	cfg            Config
	rng            *rand.Rand
	now            int64
	seq            uint64
	q              evHeap
	slots          []*slot
	st             *store
	co             coord
	cl             []clientState
	hist           []Op
	issued, done   int
	txnSeq, reqSeq int
	stats          Stats

	dirNames, fileNames []string
	root                cache.Inode
}

type clientState struct{ op int } // -1 idle

// Run runs cfg to the end and returns its history, unchecked (Check).
func Run(cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &world{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), st: newStore(cfg.Dirs + cfg.Dirs*cfg.Files)}
	s.co.expired = make(map[coherence.NodeID]bool)
	s.root = cache.Inode{Parent: nstore.RootParentID, ID: nstore.RootID, Type: meta.TypeDir, Perm: 0o755, Owner: "u", Group: "g"}
	for d := 0; d < cfg.Dirs; d++ {
		s.dirNames = append(s.dirNames, fmt.Sprintf("d%d", d))
	}
	for f := 0; f < cfg.Files; f++ {
		s.fileNames = append(s.fileNames, fmt.Sprintf("f%d", f))
	}
	for i := 0; i < cfg.Instances; i++ {
		sl := &slot{idx: i, dep: i % cfg.Deployments, noCache: i < cfg.Uncached, clockOff: s.rng.Int64N(int64(time.Second))}
		if cfg.Drift > 0 {
			b := int64(cfg.Drift * 1e6)
			sl.ppm = s.rng.Int64N(2*b-1) - (b - 1)
		}
		s.slots = append(s.slots, sl)
		s.newIncarnation(sl)
		s.at(s.rng.Int64N(tick), event{kind: evTick, slot: i})
	}
	for c := 0; c < cfg.Clients; c++ {
		s.cl = append(s.cl, clientState{op: -1})
		s.at(s.rng.Int64N(think)+int64(50*time.Millisecond), event{kind: evClient, n: c})
	}
	if cfg.Faults {
		s.at(s.expo(partMean)+int64(200*time.Millisecond), event{kind: evPartition})
		s.at(s.expo(crashMean)+int64(200*time.Millisecond), event{kind: evCrash})
	}
	for s.done < cfg.Ops && len(s.q) > 0 {
		e := s.q.pop()
		s.now = e.at
		s.stats.Events++
		s.handle(e)
	}
	s.stats.Ops = s.done
	s.stats.SimTime = time.Duration(s.now)
	return &Result{Seed: cfg.Seed, Ops: s.hist, Stats: s.stats, commits: s.st.commits}, nil
}

func (s *world) at(t int64, e event) {
	e.at = t
	s.seq++
	e.seq = s.seq
	s.q.push(e)
}

func (s *world) after(d int64, e event) { s.at(s.now+d, e) }

func (s *world) expo(mean time.Duration) int64 { return int64(s.rng.ExpFloat64() * float64(mean)) }

// delay is one message's transit time: 50 µs to 1 ms, and with faults on
// sometimes up to 40 ms (a slow path, a retransmission).
func (s *world) delay() int64 {
	d := int64(50*time.Microsecond) + s.rng.Int64N(int64(950*time.Microsecond))
	if s.cfg.Faults && s.rng.Float64() < slowChance {
		d += s.rng.Int64N(int64(40 * time.Millisecond))
	}
	return d
}

func (s *world) tracef(format string, args ...any) {
	if s.cfg.Trace != nil {
		s.cfg.Trace(fmt.Sprintf("%12d ", s.now) + fmt.Sprintf(format, args...))
	}
}

func (s *world) handle(e event) {
	switch e.kind {
	case evTick:
		s.onTick(s.slots[e.slot])
		s.after(tick, event{kind: evTick, slot: e.slot})
	case evPeer:
		sl := s.slots[e.slot]
		if sl.partitioned(s.now) || !sl.live(e.inc) {
			s.stats.Dropped++
			return
		}
		s.tracef("deliver %s", e.msg)
		sl.node.Tick(sl.local(s.now))
		sl.node.Step(*e.msg)
		s.process(sl)
	case evStoreReq:
		s.onStore(e.sm)
	case evStoreResp:
		s.onStoreResp(e)
	case evCoordReq:
		s.onCoordReq(e)
	case evCoordResp:
		s.onCoordResp(e)
	case evExpire:
		s.onExpire(e)
	case evView:
		sl := s.slots[e.slot]
		if sl.live(e.inc) {
			s.tracef("%s view v%d %v", sl.id, e.view.Version, e.view.Members)
			sl.node.ViewChanged(*e.view)
			s.process(sl)
		}
	case evClient:
		s.issue(e.n)
	case evRequest:
		s.onRequest(e)
	case evReply:
		s.onReply(e)
	case evTimeout:
		if op := &s.hist[e.n]; op.pending {
			op.pending = false
			s.stats.Timeouts++
			s.clientDone(op.Client)
		}
	case evPartition:
		sl := s.slots[s.rng.IntN(len(s.slots))]
		s.partition(sl)
		s.after(s.expo(partMean), event{kind: evPartition})
	case evCrash:
		sl := s.slots[s.rng.IntN(len(s.slots))]
		if sl.up {
			s.tracef("%s crashes", sl.id)
			s.stats.Crashes++
			s.disconnect(sl)
			sl.up, sl.node = false, nil
			s.after(int64(20*time.Millisecond)+s.rng.Int64N(int64(300*time.Millisecond)), event{kind: evRestart, slot: sl.idx})
		}
		s.after(s.expo(crashMean), event{kind: evCrash})
	case evRestart:
		s.newIncarnation(s.slots[e.slot])
	}
}

// partition cuts sl off from the coordinator and its peers, and stalls its
// store connection, for 50 ms to 3 TTLs: often long enough for its lease
// to expire.
func (s *world) partition(sl *slot) {
	if sl.partitioned(s.now) {
		return
	}
	d := int64(50*time.Millisecond) + s.rng.Int64N(3*int64(s.cfg.TTL))
	sl.partEnd = s.now + d
	s.stats.Partitions++
	s.tracef("%s partitioned for %v", sl.id, time.Duration(d))
}
