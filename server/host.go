package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/nimbus-fs/nimbus/platform"
)

// InProcessHost is the local platform's in-process hosting
// (platform.Host): each instance is a *Server in the gateway's process,
// on 127.0.0.1:0, with its own listener, cache, store connections and
// coordinator session, exactly as if it were a separate `nimbus serve`
// (docs/ELASTIC.md, "The local platform and its hosting"). It saves a
// process start per instance; a crash of one instance is then a crash of
// them all, which is why the process hosting is the default.
//
// It requires a shared store (PostgreSQL): instances in one process could
// share one opened Pebble store and an in-process coordinator only if
// Config took them injected, and the engine's duties assume a Pebble store
// is one engine's alone (orphan blocks are removed at open, the lease
// monitor runs unelected, the local invalidator sees only its own
// writes). With a cache, the coordinator must be etcd, so that the
// instances' caches are kept coherent by the coherence loop.
type InProcessHost struct {
	// Base is every instance's configuration; Listen, DataDir, Deployment,
	// Deployments and DebugAddr are set per instance.
	Base Config
	// DataDir holds one directory per instance, DataDir/instances/ID (its
	// block replicas).
	DataDir string
}

// CheckInProcess reports why cfg cannot host instances in process.
func CheckInProcess(cfg Config) error {
	if !cfg.UsesPostgres() {
		return errors.New("server: the local platform needs a shared store: --store postgres://... (instances on the embedded store would each have a namespace of their own)")
	}
	if cfg.CacheBytes > 0 && !cfg.sharedCoordinator() {
		return errors.New("server: the local platform with --cache-bytes needs --coordinator etcd://... (the instances' caches are kept coherent through it)")
	}
	return nil
}

// Start implements platform.Host.
func (h *InProcessHost) Start(ctx context.Context, spec platform.Spec) (platform.Instance, error) {
	cfg := h.Base
	if err := CheckInProcess(cfg); err != nil {
		return nil, err
	}
	cfg.Listen, cfg.Advertise, cfg.DebugAddr = "127.0.0.1:0", "", ""
	cfg.Deployment, cfg.Deployments = spec.Deployment, spec.Deployments
	cfg.PlatformInstance = true
	cfg.DataDir = filepath.Join(h.DataDir, "instances", strconv.FormatUint(uint64(spec.ID), 10))
	if cfg.Logger != nil {
		cfg.Logger = cfg.Logger.With("instance", uint64(spec.ID))
	}
	s, err := New(cfg)
	if errors.Is(err, ErrDeployments) {
		// Starting it again would fail the same way.
		return nil, fmt.Errorf("%w: instance %d: %w", platform.ErrPermanent, spec.ID, err)
	}
	if err != nil {
		return nil, fmt.Errorf("server: start instance %d: %w", spec.ID, err)
	}
	if err := s.Start(ctx); err != nil {
		_ = s.Stop(context.Background())
		return nil, fmt.Errorf("server: start instance %d: %w", spec.ID, err)
	}
	in := &inProcess{s: s, member: s.memberID(), done: make(chan struct{}), life: make(chan struct{})}
	go in.watch()
	return in, nil
}

// inProcess is one in-process instance.
type inProcess struct {
	s       *Server
	member  string        // its first incarnation's member ID
	done    chan struct{} // closed once stopped
	life    chan struct{} // closed by Stop or Kill: watch stops waiting
	endOnce sync.Once
	stopErr error
}

// watch stops the server when it fails on its own (its store failed,
// its listener died): the platform sees the instance exit.
func (in *inProcess) watch() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-in.life; cancel() }()
	_ = in.s.Wait(ctx)
	in.end(context.Background())
}

func (in *inProcess) end(ctx context.Context) {
	in.endOnce.Do(func() {
		close(in.life)
		in.stopErr = in.s.Stop(ctx)
		close(in.done)
	})
}

func (in *inProcess) Addr() string          { return in.s.Addr() }
func (in *inProcess) Done() <-chan struct{} { return in.done }

// MemberID is the server's member ID (platform.Member), what the platform
// evicts once Done is closed. That is safe only if the server's shutdown
// ran to its end (its coherence loop stopped, so its cache serves nothing;
// its store pool and coordinator closed), which the stop of a Kill does
// not wait for when requests are stuck on the store (Server.Stop gives up
// after FailStopTimeout): then, after Done, "" (nothing to evict; the
// lease expires by itself).
func (in *inProcess) MemberID() string {
	select {
	case <-in.done:
		if !in.s.shutDown.Load() {
			return ""
		}
	default:
	}
	return in.member
}

// Stop stops the server gracefully (Server.Stop).
func (in *inProcess) Stop(ctx context.Context) error {
	in.end(ctx)
	<-in.done
	return in.stopErr
}

// Kill is the closest an in-process server comes to SIGKILL: a stop whose
// deadline has already passed, so that requests in flight are abandoned
// (after FailStopTimeout at most) instead of awaited.
func (in *inProcess) Kill() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	go in.end(ctx)
	return nil
}
