package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// SubtreeOps are the operations the subtree workload times on a tree's root.
var SubtreeOps = []string{"delete", "mv", "chmod"}

// SubtreeChmodPerm is the mode chmod gives every inode of the tree: it keeps
// the owner's rwx on directories so that the walk can go on below them.
const SubtreeChmodPerm meta.Perm = 0o750

// SubtreeConfig is the subtree-operation workload: build a tree,
// run one operation on its root, and watch the server's memory and a
// background load outside the tree while it runs.
type SubtreeConfig struct {
	Root          string        // the tree is built in a fresh directory Root/.subtree-OP-FILES-NANOS
	Files         int           // files in the tree (the Spotify shape of prepare)
	Op            string        // delete, mv or chmod
	Clients       int           // parallel writers while building the tree
	Background    int           // background clients (stat and create outside the tree); 0: none
	Window        time.Duration // length of the background measurement before the operation
	SampleEvery   time.Duration // server memory sampling period during the operation
	BackgroundSet int           // files the background clients stat
}

// DefaultSubtreeConfig deletes a 16,384-file tree under /bench with 4
// background clients measured for 3 s before.
func DefaultSubtreeConfig() SubtreeConfig {
	return SubtreeConfig{Root: "/bench", Files: 1 << 14, Op: "delete", Clients: 16, Background: 4,
		Window: 3 * time.Second, SampleEvery: 50 * time.Millisecond, BackgroundSet: 256}
}

// Validate reports a configuration subtree cannot run.
func (c SubtreeConfig) Validate() error {
	if _, err := meta.CleanPath("bench", c.Root); err != nil {
		return fmt.Errorf("bench: subtree root: %w", err)
	}
	known := false
	for _, op := range SubtreeOps {
		known = known || op == c.Op
	}
	switch {
	case !known:
		return fmt.Errorf("bench: subtree: unknown op %q (want delete, mv or chmod)", c.Op)
	case c.Files < 1 || c.Clients < 1:
		return errors.New("bench: subtree needs positive files and clients")
	case c.Background < 0 || c.BackgroundSet < 1:
		return errors.New("bench: subtree: negative background clients or no background files")
	case c.Background > 0 && c.Window <= 0:
		return errors.New("bench: subtree: background load needs a positive window")
	case c.SampleEvery <= 0:
		return errors.New("bench: subtree: sampling period must be positive")
	}
	return nil
}

// SubtreeResult is one subtree run: a Result (one operation by one client,
// its latency the operation's time, clamped at a minute by the histogram)
// with the subtree's own figures beside its fields, flat in the JSON.
type SubtreeResult struct {
	Result
	Seconds float64 `json:"seconds"` // the operation, unclamped
	Dir     string  `json:"dir"`     // the tree's root
	MovedTo string  `json:"moved_to,omitempty"`
	Dirs    int     `json:"dirs"`    // directories in the tree, its root included
	Inodes  int64   `json:"inodes"`  // inodes the operation touched (a chmod walk: changed; else the tree's size)
	BuildS  float64 `json:"build_s"` // time to build the tree
	// ClientSide: the operation is a walk by the driver, one request per
	// inode (chmod on a target without meta.RecursiveAttrs, WebHDFS's: what
	// an HDFS client's chmod -R does). Otherwise chmod is one operation of
	// the server, as `nimbus fs chmod -R` with an octal mode.
	ClientSide bool `json:"client_side"`
	// Server memory: process RSS from the Prometheus endpoint (the Java heap
	// for an HDFS /jmx URL) just before the operation and the highest sample
	// while it ran. 0 when not sampled (MemError says why). For the embedded
	// target the process is the driver's too.
	ServerRSSMBBefore float64 `json:"server_rss_mb_before"`
	ServerRSSMBMax    float64 `json:"server_rss_mb_max"`
	// The parts of a Nimbus server's memory (MemSample), before and the
	// highest of each while the operation ran (not necessarily at one
	// moment); absent for other servers.
	ServerGoHeapMBBefore     float64     `json:"server_go_heap_mb_before,omitempty"`
	ServerGoHeapMBMax        float64     `json:"server_go_heap_mb_max,omitempty"`
	ServerBlockCacheMBBefore float64     `json:"server_block_cache_mb_before,omitempty"`
	ServerBlockCacheMBMax    float64     `json:"server_block_cache_mb_max,omitempty"`
	ServerMemtableMBBefore   float64     `json:"server_memtable_mb_before,omitempty"`
	ServerMemtableMBMax      float64     `json:"server_memtable_mb_max,omitempty"`
	MemSource                string      `json:"mem_source,omitempty"`
	MemSamples               []MemSample `json:"mem_samples,omitempty"`
	MemError                 string      `json:"mem_error,omitempty"`
	// The background load (stat of existing files and creates, alternately,
	// outside the tree): over Window before the operation, and over the
	// operation itself.
	BackgroundClients      int     `json:"background_clients"`
	BackgroundWindowS      float64 `json:"background_window_s"`
	BackgroundOpsSBefore   float64 `json:"background_ops_s_before"`
	BackgroundOpsSDuring   float64 `json:"background_ops_s_during"`
	BackgroundP99MsBefore  float64 `json:"background_p99_ms_before"`
	BackgroundP99MsDuring  float64 `json:"background_p99_ms_during"`
	BackgroundMaxMsDuring  float64 `json:"background_max_ms_during"`
	BackgroundOpsDuring    int64   `json:"background_ops_during"`
	BackgroundErrorsDuring int64   `json:"background_errors_during"`
}

// SubtreeDocument is what --json writes for subtree: a Document whose
// results carry the subtree fields (ReadDocument still reads it, dropping
// them).
type SubtreeDocument struct {
	*Document
	Results []SubtreeResult `json:"results"`
}

// WriteFile writes the document as indented JSON, atomically.
func (d *SubtreeDocument) WriteFile(path string) error { return writeJSONFile(path, d) }

// Subtree builds a tree of cfg.Files files in a fresh directory under
// cfg.Root, starts the background load, measures it for cfg.Window, then
// runs cfg.Op on the tree's root while the load goes on and the server's
// memory is sampled. The background files stay under Root/.subtree-bg for
// the next run; the creates are removed afterwards. What mv moved and what
// chmod changed are left in place (the result names them).
func Subtree(ctx context.Context, env *Env, cfg SubtreeConfig, progress *Progress) (*SubtreeResult, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	root, _ := meta.CleanPath("bench", cfg.Root)
	dir := meta.JoinPath(root, fmt.Sprintf(".subtree-%s-%d-%d", cfg.Op, cfg.Files, time.Now().UnixNano()))
	pcfg := DefaultPrepareConfig()
	pcfg.Tree.Root, pcfg.Tree.Files, pcfg.Clients, pcfg.FileSize = dir, cfg.Files, cfg.Clients, 0
	built, err := Prepare(ctx, env, pcfg, progress)
	if err != nil {
		return nil, fmt.Errorf("bench: subtree: build %s: %w", dir, err)
	}
	res := &SubtreeResult{Dir: dir, Dirs: built.Dirs + 1, BuildS: built.Duration.Seconds(),
		BackgroundClients: cfg.Background}

	bg, err := newSubtreeBackground(ctx, env, root, cfg)
	if err != nil {
		return nil, err
	}
	defer bg.cleanup(ctx)
	if cfg.Background > 0 {
		m, err := Run(ctx, RunConfig{Clients: cfg.Background, Duration: cfg.Window}, bg.op)
		if err != nil {
			return nil, err
		}
		if m.Errors > 0 {
			return nil, fmt.Errorf("bench: subtree: %d background operations failed before the operation: %v", m.Errors, m.ErrorSamples)
		}
		res.BackgroundWindowS = m.Duration.Seconds()
		res.BackgroundOpsSBefore = m.Throughput()
		res.BackgroundP99MsBefore = float64(m.Hist.ValueAtQuantile(99)) / 1000
	}

	var sampler *memSampler
	if env.MetricsURL != "" {
		res.MemSource = env.MetricsURL
		if m, err := sampleMemory(ctx, httpClientForSamples, env.MetricsURL); err == nil {
			res.ServerRSSMBBefore = mb(m.Bytes)
			res.ServerGoHeapMBBefore, res.ServerBlockCacheMBBefore, res.ServerMemtableMBBefore =
				mb(m.GoHeapBytes), mb(m.BlockCacheBytes), mb(m.MemtableBytes)
		} else {
			res.MemError = err.Error()
		}
	} else {
		res.MemError = "the target has no metrics endpoint"
	}

	// The background clients run from just before the operation until it
	// ends: Next returns false once stop is set.
	var stop atomic.Bool
	type bgOut struct {
		m   *Measurement
		err error
	}
	bgDone := make(chan bgOut, 1)
	if cfg.Background > 0 {
		go func() {
			m, err := Run(ctx, RunConfig{Clients: cfg.Background, Unbounded: true}, func(i int) Op {
				o := bg.op(i).(*subtreeBgOp)
				o.stop = &stop
				return o
			})
			bgDone <- bgOut{m, err}
		}()
	}
	if res.MemError == "" {
		sampler = startMemSampler(ctx, env.MetricsURL, cfg.SampleEvery)
	}
	var took time.Duration
	var inodes atomic.Int64
	m, runErr := Run(ctx, RunConfig{Clients: 1, OpsPerClient: 1, Probe: env.serverProbe()}, func(int) Op {
		return OpFunc(func(ctx context.Context) error {
			begin := time.Now()
			defer func() { took = time.Since(begin) }()
			switch cfg.Op {
			case "delete":
				return env.FS.Delete(ctx, env.User, dir, true)
			case "mv":
				res.MovedTo = dir + "-moved"
				return env.FS.Rename(ctx, env.User, dir, res.MovedTo, meta.RenameOptions{})
			default:
				if ra, ok := env.FS.(meta.RecursiveAttrs); ok {
					err := ra.SetPermissionRecursive(ctx, env.User, dir, SubtreeChmodPerm)
					if !errors.Is(err, meta.ErrUnsupported) {
						return err
					}
				}
				res.ClientSide = true
				return chmodWalk(ctx, env, dir, SubtreeChmodPerm, &inodes)
			}
		})
	})
	if sampler != nil {
		samples, serr := sampler.Stop()
		res.MemSamples = samples
		for _, s := range samples {
			res.ServerRSSMBMax = max(res.ServerRSSMBMax, mb(s.Bytes))
			res.ServerGoHeapMBMax = max(res.ServerGoHeapMBMax, mb(s.GoHeapBytes))
			res.ServerBlockCacheMBMax = max(res.ServerBlockCacheMBMax, mb(s.BlockCacheBytes))
			res.ServerMemtableMBMax = max(res.ServerMemtableMBMax, mb(s.MemtableBytes))
		}
		if serr != nil && res.MemError == "" {
			res.MemError = serr.Error()
		}
	}
	stop.Store(true)
	if cfg.Background > 0 {
		out := <-bgDone
		if out.err != nil && runErr == nil {
			runErr = out.err
		}
		if out.m != nil {
			res.BackgroundOpsDuring, res.BackgroundErrorsDuring = out.m.Ops, out.m.Errors
			res.BackgroundOpsSDuring = out.m.Throughput()
			if out.m.Ops > 0 {
				res.BackgroundP99MsDuring = float64(out.m.Hist.ValueAtQuantile(99)) / 1000
				res.BackgroundMaxMsDuring = float64(out.m.Hist.Max()) / 1000
			}
		}
	}
	if m != nil {
		res.Result = NewResult("subtree", cfg.Op, env, m)
	}
	res.Result.Files = cfg.Files
	res.Seconds = took.Seconds()
	res.Inodes = int64(res.Dirs + cfg.Files + 1) // + the manifest prepare wrote
	if res.ClientSide {
		res.Inodes = inodes.Load()
	}
	if runErr == nil && m != nil && m.Errors > 0 {
		runErr = fmt.Errorf("bench: subtree %s %s: %v", cfg.Op, dir, m.ErrorSamples)
	}
	return res, runErr
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// chmodWalk sets perm on dir and every inode below it, symlinks excepted,
// one SetPermission each, depth first in listing order: what `nimbus fs
// chmod -R` does (cmd/nimbus/fs_chmod.go), with no server-side recursion.
// n counts the inodes changed.
func chmodWalk(ctx context.Context, env *Env, dir string, perm meta.Perm, n *atomic.Int64) error {
	if err := env.FS.SetPermission(ctx, env.User, dir, perm); err != nil {
		return fmt.Errorf("bench: chmod %s: %w", dir, err)
	}
	n.Add(1)
	after := ""
	for {
		l, err := env.FS.List(ctx, env.User, dir, after, 1000)
		if err != nil {
			return fmt.Errorf("bench: list %s: %w", dir, err)
		}
		for i := range l.Entries {
			st := &l.Entries[i]
			p := meta.JoinPath(dir, st.Name())
			switch {
			case st.Type == meta.TypeSymlink:
			case st.IsDir():
				if err := chmodWalk(ctx, env, p, perm, n); err != nil {
					return err
				}
			default:
				if err := env.FS.SetPermission(ctx, env.User, p, perm); err != nil {
					return fmt.Errorf("bench: chmod %s: %w", p, err)
				}
				n.Add(1)
			}
		}
		if l.Remaining == 0 || len(l.Entries) == 0 {
			return nil
		}
		after = l.Entries[len(l.Entries)-1].Name()
	}
}

// subtreeBackground is the load outside the tree: files to stat under
// Root/.subtree-bg/stat (made once, kept), creates under a directory of this
// run removed at the end.
type subtreeBackground struct {
	env     *Env
	statSet []string
	create  string
	seq     atomic.Int64
}

func newSubtreeBackground(ctx context.Context, env *Env, root string, cfg SubtreeConfig) (*subtreeBackground, error) {
	b := &subtreeBackground{env: env}
	if cfg.Background == 0 {
		return b, nil
	}
	base := meta.JoinPath(root, ".subtree-bg")
	statDir := meta.JoinPath(base, "stat")
	b.create = meta.JoinPath(base, "create-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	for _, d := range []string{statDir, b.create} {
		if err := env.FS.Mkdirs(ctx, env.User, d, meta.DefaultDir); err != nil {
			return nil, fmt.Errorf("bench: subtree: background %w", err)
		}
	}
	for i := range cfg.BackgroundSet {
		p := fmt.Sprintf("%s/f%05d", statDir, i)
		if err := createFile(ctx, env, p, nil, false); err != nil && !errors.Is(err, meta.ErrExists) {
			return nil, fmt.Errorf("bench: subtree: background file: %w", err)
		}
		b.statSet = append(b.statSet, p)
	}
	return b, nil
}

func (b *subtreeBackground) op(client int) Op {
	return &subtreeBgOp{b: b, k: client * 7919}
}

func (b *subtreeBackground) cleanup(ctx context.Context) {
	if b.create != "" {
		_ = b.env.FS.Delete(ctx, b.env.User, b.create, true)
	}
}

// subtreeBgOp alternates a stat of one of the background files and a create
// of a new empty file.
type subtreeBgOp struct {
	b    *subtreeBackground
	stop *atomic.Bool // nil: never stopped (a timed run)
	k    int
	stat bool
	path string
}

func (o *subtreeBgOp) Next(seq int64) bool {
	if o.stop != nil && o.stop.Load() {
		return false
	}
	o.stat = seq%2 == 0
	if o.stat {
		o.k++
		o.path = o.b.statSet[o.k%len(o.b.statSet)]
	} else {
		o.path = fmt.Sprintf("%s/c%09d", o.b.create, o.b.seq.Add(1))
	}
	return true
}

func (o *subtreeBgOp) Do(ctx context.Context) error {
	if o.stat {
		_, err := o.b.env.FS.Stat(ctx, o.b.env.User, o.path)
		return err
	}
	return createFile(ctx, o.b.env, o.path, nil, false)
}
