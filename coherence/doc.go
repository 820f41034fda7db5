// Package coherence is the INV/ACK protocol that keeps the metadata caches
// of many NameNode instances coherent with the store (λFS, sections 3.1–3.5
// and appendices B–D; docs/ELASTIC.md, "Coherence protocol"), written as a
// pure state machine in the manner of etcd's raft package: no goroutines,
// clocks, sockets or randomness inside. An I/O loop feeds it messages
// (Step), time (Tick) and events, and carries out what Ready returns. That
// is what lets coherence/sim run many instances from one seed, with every
// fault, and replay any failure.
//
// One Node per instance incarnation plays both roles.
//
// The writer, once the store has granted a write's row locks
// (WriteLocked): holds the targets in its own cache, sends INV to every
// live instance a target reaches (Everywhere targets: all; the others: the
// instances of the deployment that Config.Owner says owns Target.Route;
// never an instance its view says has no cache, Member.NoCache), re-sends it every Config.Retry, and crosses an instance off on its ACK or
// when a membership view no longer lists it. When none is left, Ready
// carries a Commit; the I/O loop commits in the store and reports
// Committed; the core releases locally and sends RELEASE, one-way.
//
// The holder, on INV: cache.Hold on the targets (drop what they cover,
// refuse fills of it; the release refuses every fill begun before it), then
// ACK. On RELEASE it releases. RELEASE may be lost, so a holder re-sends
// its ACK every Retry, and a writer answers an ACK for a write it has
// finished with RELEASE. A writer may die instead: its holds are released
// only after the store has fenced it (Fenced), never merely because it
// left the membership: a writer cut off from the coordinator may still
// have a commit on its way to the store, and a fill after an early release
// would cache the value that commit is about to replace (the simulator
// finds exactly that with Config.DisableFencing).
//
// Serving. An instance answers from its cache, and installs fills, only
// while Serving(now): its local clock is before its session deadline
// (renewal send time + TTL·(1−drift) − margin, docs/ELASTIC.md "Leases and
// fencing"), which falls before the coordinator expires its lease, which
// comes before any writer stops waiting for its ACK. So a partitioned
// instance stops serving from its cache before a write it did not
// acknowledge can commit. Past the deadline the incarnation is over
// (Err returns ErrLost): the server starts a new Node under a new ID with
// an empty cache.
//
// Joins: the write floor. A new incarnation must not fill until every write
// that may not have invalidated it can no longer commit. The first design,
// a JOIN/JOINACK handshake with the members of the joiner's first view
// ("answer once your writes begun without me have finished"), has a hole:
// a writer that lost its lease just before that view, whom no live member
// may ever have seen in a view, can still have a commit in flight, and
// nobody answers for it. So the store keeps a write floor instead: each
// Commit carries the version of the view its targets were computed from,
// the store refuses a commit below the floor, and a joiner raises the floor
// to its join version (Ready.Floor; a transaction that waits for the write
// transactions holding the floor row shared) and serves once FloorRaised
// says it is there. Every write that can commit afterwards was begun under
// a view that lists the joiner, so invalidated it. A write begun under an
// older view is refused and retried: the price is a failed write per join
// and writer in flight, where the handshake would have waited for it.
//
// Fencing. Fence(w) in the store refuses every later commit of w, waiting
// for the ones in flight (coherence/loop: an UPDATE of w's fence row, which
// each of w's write transactions locks shared before its commit).
// Every instance that sees w leave asks for it (Ready.Fences; idempotent).
//
// Incarnation IDs are never reused. Peers that saw an ID leave have
// fenced it and no longer invalidate it; if the coordinator admitted it
// again (a Join retried under the same ID after the first attempt's lease
// expired), that instance would serve from a cache nobody invalidates. The
// simulator's coordinator once did exactly this, and the check caught the
// stale reads (docs/ELASTIC.md). A view that omits this instance after it
// joined ends the incarnation for good, even if a later view lists it.
//
// Determinism: the same calls in the same order give the same Ready
// batches (maps are never iterated where order shows). A Node is not safe
// for concurrent use; its cache is (reads go to the cache directly).
//
// The I/O loop, in outline (one goroutine owns the Node; RPC handlers,
// the coordinator's watch, the store's answers and a ticker feed it
// through channels):
//
//	for {
//		select {
//		case m := <-peerMsgs:
//			n.Step(m)
//		case now := <-ticker:
//			n.Tick(now)
//			if n.Err() != nil { return rejoin() } // new ID, empty cache
//		case v := <-watch:
//			n.ViewChanged(v)
//		case d := <-renewals:
//			n.Renewed(d) // session.Deadline()
//		case w := <-lockedWrites: // the write's transaction holds its locks
//			op, err := n.WriteLocked(w.targets)
//			if err != nil { w.abort(err); continue }
//			pending[op] = w
//		case r := <-storeResults:
//			switch r.kind {
//			case commit: n.Committed(r.op, r.ok); pending[r.op].reply(r.ok)
//			case fence:  n.Fenced(r.node)
//			case floor:  n.FloorRaised(r.version)
//			}
//		}
//		rd := n.Ready()
//		for _, m := range rd.Messages { go rpc.Send(m) }           // best effort
//		for _, c := range rd.Commits { go pending[c.Op].commit(c.View) } // checks fence and floor
//		for _, id := range rd.Fences { go fenceUntilDone(id) }
//		if rd.Floor != 0 { go raiseFloorUntilDone(rd.Floor) }
//	}
//
// and a read, on any goroutine (the check and the lookup must be one
// decision: a read answered from the cache linearizes there):
//
//	if n.Serving(clock.Now()) { if row, ok := c.Get(p, name); ok { return row } }
//	fill := n.Serving(clock.Now()); t := c.Begin()
//	row := store.Get(p, name) // unlocked, read committed
//	if fill && n.Serving(clock.Now()) { c.Put(t, row) }
//
// Serving reads fields the loop writes: a real server keeps a copy of
// (joined, deadline) under a mutex or in atomics for its readers; the core
// itself is single-threaded on purpose.
package coherence
