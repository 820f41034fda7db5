package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// MicroOps lists the operations of the micro workload.
var MicroOps = []string{"create", "mkdir", "read", "stat", "ls", "delete", "rename", "chmod"}

// MicroConfig is one micro command: an operation swept over client counts.
type MicroConfig struct {
	Op           string
	Clients      []int         // one run per count, in order
	Duration     time.Duration // per run; or
	OpsPerClient int64         // per run
	HotDir       bool          // create, mkdir: every client in one shared directory
	Echo         bool          // measure echo at each client count first
	Seed         int64         // random choices of the clients
	ReadSize     int64         // bytes asked for by read
	ListLimit    int           // entries asked for by ls
	PoolSize     int           // random paths pre-built for read, stat, chmod
	Keep         bool          // keep the directories create and mkdir fill
	// Warmup is spent sending echoes from the largest client count before the
	// first run, untimed, so that connections are open and pools are filled.
	Warmup time.Duration
}

// DefaultMicroConfig returns stat at 1 client for 5 s, with echo.
func DefaultMicroConfig() MicroConfig {
	return MicroConfig{Op: "stat", Clients: []int{1}, Duration: 5 * time.Second, Echo: true, Seed: 1,
		ReadSize: 64 << 10, ListLimit: 1000, PoolSize: 1 << 16, Warmup: 500 * time.Millisecond}
}

// Validate reports an unknown operation or a run with no bound.
func (c MicroConfig) Validate() error {
	if !slices.Contains(MicroOps, c.Op) {
		return fmt.Errorf("bench: unknown micro op %q (one of %v)", c.Op, MicroOps)
	}
	if len(c.Clients) == 0 {
		return errors.New("bench: no client counts")
	}
	for _, n := range c.Clients {
		if err := (RunConfig{Clients: n, Duration: c.Duration, OpsPerClient: c.OpsPerClient}).Validate(); err != nil {
			return err
		}
	}
	if c.HotDir && c.Op != "create" && c.Op != "mkdir" {
		return fmt.Errorf("bench: --hot-dir applies to create and mkdir, not %s", c.Op)
	}
	if c.Warmup < 0 {
		return errors.New("bench: negative warmup")
	}
	if c.ReadSize < 1 || c.ListLimit < 1 || c.PoolSize < 1 {
		return errors.New("bench: read size, list limit and pool size must be positive")
	}
	return nil
}

func (c MicroConfig) runOn(env *Env, clients int) RunConfig {
	return RunConfig{Clients: clients, Duration: c.Duration, OpsPerClient: c.OpsPerClient, Probe: env.serverProbe()}
}

// LoadTree rebuilds the tree prepared under root from its manifest. The error
// wraps meta.ErrNotFound when nothing was prepared there; an unfinished
// prepare is an error too.
func LoadTree(ctx context.Context, env *Env, root string) (*Tree, *Manifest, error) {
	m, err := ReadManifest(ctx, env, root)
	if err != nil {
		return nil, nil, err
	}
	if !m.Complete {
		return nil, nil, fmt.Errorf("bench: the tree under %s was not prepared to the end; run prepare again", root)
	}
	t, err := NewTree(m.Tree)
	return t, m, err
}

// Micro runs cfg.Op at each client count on the prepared tree and returns the
// results (echo results first at each count when cfg.Echo). Delete and rename
// change the tree; Micro puts it back, untimed, after each run.
func Micro(ctx context.Context, env *Env, cfg MicroConfig, tree *Tree, progress *Progress) ([]Result, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := warmup(ctx, env, cfg.Warmup, cfg.Clients); err != nil {
		return nil, err
	}
	var results []Result
	for _, clients := range cfg.Clients {
		var echo float64
		if cfg.Echo {
			m, err := Run(ctx, cfg.runOn(env, clients), func(int) Op { return OpFunc(env.FS.Echo) })
			if err != nil {
				return results, err
			}
			r := NewResult("echo", "echo", env, m)
			echo = r.ThroughputOpsS
			results = append(results, r)
		}
		r, err := microRun(ctx, env, cfg, tree, clients, progress)
		if err != nil {
			return results, err
		}
		r.SetEcho(echo)
		results = append(results, r)
	}
	return results, nil
}

func microRun(ctx context.Context, env *Env, cfg MicroConfig, tree *Tree, clients int, progress *Progress) (Result, error) {
	seed := uint64(cfg.Seed)
	rngFor := func(i int) *rand.Rand { return rand.New(rand.NewPCG(seed, uint64(i)+1)) }
	var (
		m   *Measurement
		err error
	)
	switch cfg.Op {
	case "stat", "read", "chmod":
		pool := filePool(tree, cfg.PoolSize, seed)
		m, err = Run(ctx, cfg.runOn(env, clients), func(i int) Op {
			return &randomFileOp{env: env, op: cfg.Op, pool: pool, rng: rngFor(i), readSize: cfg.ReadSize}
		})
	case "ls":
		dirs := make([]string, 0, tree.NumDirs()+1)
		dirs = append(dirs, tree.Root())
		for i := 0; i < tree.NumDirs(); i++ {
			dirs = append(dirs, tree.DirPath(i))
		}
		m, err = Run(ctx, cfg.runOn(env, clients), func(i int) Op {
			return &listOp{env: env, dirs: dirs, rng: rngFor(i), limit: cfg.ListLimit}
		})
	case "create", "mkdir":
		base := meta.JoinPath(meta.JoinPath(tree.Root(), ".runs"), fmt.Sprintf("%s-%d", cfg.Op, time.Now().UnixNano()))
		dirOf := func(i int) string {
			if cfg.HotDir {
				return meta.JoinPath(base, "hot")
			}
			return meta.JoinPath(base, "c"+strconv.Itoa(i))
		}
		for i := 0; i < clients; i++ {
			if err := env.FS.Mkdirs(ctx, env.User, dirOf(i), meta.DefaultDir); err != nil {
				return Result{}, fmt.Errorf("bench: %s: make client directory: %w", cfg.Op, err)
			}
			if cfg.HotDir {
				break
			}
		}
		m, err = Run(ctx, cfg.runOn(env, clients), func(i int) Op {
			return &newEntryOp{env: env, mkdir: cfg.Op == "mkdir", dir: dirOf(i), prefix: "n" + strconv.Itoa(i) + "-"}
		})
		if !cfg.Keep {
			if derr := env.FS.Delete(context.WithoutCancel(ctx), env.User, base, true); derr != nil && err == nil {
				err = fmt.Errorf("bench: %s: clean up %s: %w", cfg.Op, base, derr)
			}
		}
	case "delete", "rename":
		perm := rand.New(rand.NewPCG(seed, 0)).Perm(tree.NumFiles())
		ops := make([]*treeChangeOp, clients)
		m, err = Run(ctx, cfg.runOn(env, clients), func(i int) Op {
			var part []int32
			for j := i; j < len(perm); j += clients {
				part = append(part, int32(perm[j]))
			}
			ops[i] = &treeChangeOp{env: env, tree: tree, rename: cfg.Op == "rename", part: part}
			return ops[i]
		})
		if rerr := restoreTree(context.WithoutCancel(ctx), env, tree, ops, clients, progress); rerr != nil && err == nil {
			err = rerr
		}
	}
	if m == nil {
		return Result{}, err
	}
	r := NewResult("micro", cfg.Op, env, m)
	r.HotDir = cfg.HotDir
	r.Files = tree.NumFiles()
	return r, err
}

// filePool picks n random files of the tree (with repetition when the tree is
// smaller) and builds their paths before anything is measured.
func filePool(tree *Tree, n int, seed uint64) []string {
	if n > tree.NumFiles() {
		n = tree.NumFiles()
	}
	rng := rand.New(rand.NewPCG(seed, 0xf11e))
	pool := make([]string, n)
	for i := range pool {
		pool[i] = tree.FilePath(rng.IntN(tree.NumFiles()))
	}
	return pool
}

type randomFileOp struct {
	env      *Env
	op       string
	pool     []string
	rng      *rand.Rand
	readSize int64
	path     string
	flip     bool
}

func (o *randomFileOp) Next(int64) bool {
	o.path = o.pool[o.rng.IntN(len(o.pool))]
	return true
}

func (o *randomFileOp) Do(ctx context.Context) error {
	switch o.op {
	case "stat":
		_, err := o.env.FS.Stat(ctx, o.env.User, o.path)
		return err
	case "read":
		_, err := o.env.FS.Read(ctx, o.env.User, o.path, 0, o.readSize)
		return err
	default: // chmod: alternate so that no call is a no-op
		o.flip = !o.flip
		perm := meta.Perm(0o640)
		if o.flip {
			perm = meta.DefaultFile
		}
		return o.env.FS.SetPermission(ctx, o.env.User, o.path, perm)
	}
}

type listOp struct {
	env   *Env
	dirs  []string
	rng   *rand.Rand
	limit int
	dir   string
}

func (o *listOp) Next(int64) bool { o.dir = o.dirs[o.rng.IntN(len(o.dirs))]; return true }

func (o *listOp) Do(ctx context.Context) error {
	_, err := o.env.FS.List(ctx, o.env.User, o.dir, "", o.limit)
	return err
}

// newEntryOp creates fresh files (Create then Complete, one operation, as
// HDFS's create-and-close) or directories in its directory.
type newEntryOp struct {
	env    *Env
	mkdir  bool
	dir    string
	prefix string
	path   string
}

func (o *newEntryOp) Next(seq int64) bool {
	o.path = o.dir + "/" + o.prefix + strconv.FormatInt(seq, 10)
	return true
}

func (o *newEntryOp) Do(ctx context.Context) error {
	if o.mkdir {
		return o.env.FS.Mkdirs(ctx, o.env.User, o.path, meta.DefaultDir)
	}
	return createFile(ctx, o.env, o.path, nil, false)
}

// treeChangeOp deletes or renames the files of its partition of the tree.
// Rename goes back and forth: the first pass renames f to f.r, the second
// f.r back to f, and so on, so a long run never runs out. Delete stops when
// its partition is gone.
type treeChangeOp struct {
	env      *Env
	tree     *Tree
	rename   bool
	part     []int32
	attempts int64
	src, dst string
}

const renameSuffix = ".r"

func (o *treeChangeOp) Next(seq int64) bool {
	if len(o.part) == 0 || (!o.rename && seq >= int64(len(o.part))) {
		return false
	}
	o.attempts = seq + 1
	p := o.tree.FilePath(int(o.part[seq%int64(len(o.part))]))
	o.src, o.dst = p, p+renameSuffix
	if (seq/int64(len(o.part)))%2 == 1 {
		o.src, o.dst = o.dst, o.src
	}
	return true
}

func (o *treeChangeOp) Do(ctx context.Context) error {
	if o.rename {
		return o.env.FS.Rename(ctx, o.env.User, o.src, o.dst, meta.RenameOptions{})
	}
	return o.env.FS.Delete(ctx, o.env.User, o.src, false)
}

// restoreTree undoes what delete or rename did: it recreates deleted files
// and renames back files left under their ".r" name.
func restoreTree(ctx context.Context, env *Env, tree *Tree, ops []*treeChangeOp, clients int, progress *Progress) error {
	var todo [][2]string // {path to fix, original path}; "" first: recreate
	for _, o := range ops {
		if o == nil || len(o.part) == 0 {
			continue
		}
		n := int64(len(o.part))
		for j, k := range o.part {
			times := o.attempts / n
			if int64(j) < o.attempts%n {
				times++
			}
			p := tree.FilePath(int(k))
			switch {
			case !o.rename && times > 0:
				todo = append(todo, [2]string{"", p})
			case o.rename && times%2 == 1:
				todo = append(todo, [2]string{p + renameSuffix, p})
			}
		}
	}
	if len(todo) == 0 {
		return nil
	}
	m, err := readManifestFileSize(ctx, env, tree)
	if err != nil {
		return err
	}
	content := make([]byte, m)
	for i := range content {
		content[i] = 'a' + byte(i%26)
	}
	var next = make(chan [2]string, len(todo))
	for _, t := range todo {
		next <- t
	}
	close(next)
	progress.Start("restore", int64(len(todo)))
	defer progress.Stop()
	res, err := Run(ctx, RunConfig{Clients: clients, Unbounded: true}, func(int) Op {
		var cur [2]string
		return &funcOp{
			next: func(int64) bool { var ok bool; cur, ok = <-next; return ok },
			do: func(ctx context.Context) error {
				var err error
				if cur[0] == "" {
					err = createFile(ctx, env, cur[1], content, false)
					if errors.Is(err, meta.ErrExists) {
						err = nil
					}
				} else {
					err = env.FS.Rename(ctx, env.User, cur[0], cur[1], meta.RenameOptions{})
				}
				progress.Add(1)
				return err
			},
		}
	})
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("bench: restoring the tree: %d of %d failed: %v", res.Errors, len(todo), res.ErrorSamples)
	}
	return nil
}

func readManifestFileSize(ctx context.Context, env *Env, tree *Tree) (int, error) {
	m, err := ReadManifest(ctx, env, tree.Root())
	if err != nil {
		return 0, err
	}
	return m.FileSize, nil
}

type funcOp struct {
	next func(int64) bool
	do   func(context.Context) error
}

func (f *funcOp) Next(seq int64) bool          { return f.next(seq) }
func (f *funcOp) Do(ctx context.Context) error { return f.do(ctx) }

// warmup sends echoes from the largest client count for d, untimed.
func warmup(ctx context.Context, env *Env, d time.Duration, clients []int) error {
	if d <= 0 {
		return nil
	}
	n := 1
	for _, c := range clients {
		n = max(n, c)
	}
	_, err := Run(ctx, RunConfig{Clients: n, Duration: d}, func(int) Op { return OpFunc(env.FS.Echo) })
	return err
}

// Echo measures the transport ceiling at each client count: Target.Echo
// (op "echo") and, when the target has it, HTTPEchoer.EchoHTTP ("echo-http").
// It first warms up for warm (untimed; 0: none).
func Echo(ctx context.Context, env *Env, run RunConfig, clients []int, warm time.Duration) ([]Result, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if err := warmup(ctx, env, warm, clients); err != nil {
		return nil, err
	}
	var results []Result
	run.Probe = env.serverProbe()
	for _, n := range clients {
		run.Clients = n
		m, err := Run(ctx, run, func(int) Op { return OpFunc(env.FS.Echo) })
		if err != nil {
			return results, err
		}
		results = append(results, NewResult("echo", "echo", env, m))
		if he, ok := env.FS.(HTTPEchoer); ok {
			m, err := Run(ctx, run, func(int) Op { return OpFunc(he.EchoHTTP) })
			if err != nil {
				return results, err
			}
			results = append(results, NewResult("echo", "echo-http", env, m))
		}
	}
	return results, nil
}
