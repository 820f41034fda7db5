package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// PrepareConfig describes how to build a tree in a target.
type PrepareConfig struct {
	Tree     TreeConfig
	Clients  int // parallel writers
	FileSize int // bytes written in every file (read reads them back)
}

// DefaultPrepareConfig returns 10,000 files under /bench with 16 writers and
// 16-byte files.
func DefaultPrepareConfig() PrepareConfig {
	return PrepareConfig{Tree: DefaultTreeConfig(), Clients: 16, FileSize: 16}
}

// Validate reports a configuration prepare cannot run.
func (c PrepareConfig) Validate() error {
	if err := c.Tree.Validate(); err != nil {
		return err
	}
	if c.Clients < 1 {
		return errors.New("bench: prepare needs at least one client")
	}
	if c.FileSize < 0 || c.FileSize > 1<<20 {
		return errors.New("bench: file size must be within [0, 1 MiB]")
	}
	return nil
}

// PrepareResult summarizes a prepare run.
type PrepareResult struct {
	Tree     *Tree
	Dirs     int
	Files    int
	Existing int // files already there (a resumed prepare)
	Duration time.Duration
	Result   Result // workload "prepare", op "create-tree": per-file latency
}

// Rate is inodes (directories and files) created per second.
func (r *PrepareResult) Rate() float64 {
	return float64(r.Dirs+r.Files) / r.Duration.Seconds()
}

// Prepare builds the tree in the target: one work unit per directory (mkdir
// -p the directory, then create its files), units handed to cfg.Clients
// writers in tree order so that a parent is usually made before its children.
// Files that already exist are left as they are, so an interrupted prepare can
// be run again. The manifest is written last, marked complete.
func Prepare(ctx context.Context, env *Env, cfg PrepareConfig, progress *Progress) (*PrepareResult, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tree, err := NewTree(cfg.Tree)
	if err != nil {
		return nil, err
	}
	if err := env.FS.Mkdirs(ctx, env.User, tree.Root(), meta.DefaultDir); err != nil {
		return nil, fmt.Errorf("bench: prepare: %w", err)
	}
	man := Manifest{Tree: cfg.Tree, FileSize: cfg.FileSize, Created: time.Now().UTC()}
	man.Tree.Root = tree.Root()
	if err := WriteManifest(ctx, env, man); err != nil {
		return nil, err
	}
	content := make([]byte, cfg.FileSize)
	for i := range content {
		content[i] = 'a' + byte(i%26)
	}
	var next atomic.Int64
	var existing, dirErrs atomic.Int64
	progress.Start("prepare", int64(tree.NumDirs()+tree.NumFiles()))
	start := time.Now()
	m, err := Run(ctx, RunConfig{Clients: cfg.Clients, Unbounded: true}, func(int) Op {
		return &prepareOp{env: env, tree: tree, content: content, dir: -1,
			next: &next, existing: &existing, dirErrs: &dirErrs, progress: progress}
	})
	progress.Stop()
	res := &PrepareResult{Tree: tree, Dirs: tree.NumDirs(), Files: int(m.Ops), Existing: int(existing.Load()), Duration: time.Since(start)}
	res.Result = NewResult("prepare", "create-tree", env, m)
	res.Result.Files = tree.NumFiles()
	if err != nil {
		return res, err
	}
	if m.Errors > 0 || dirErrs.Load() > 0 {
		return res, fmt.Errorf("bench: prepare: %d files and %d directories failed, first errors: %v", m.Errors, dirErrs.Load(), m.ErrorSamples)
	}
	man.Complete = true
	if err := WriteManifest(ctx, env, man); err != nil {
		return res, err
	}
	return res, nil
}

// prepareOp is one prepare writer: it claims a directory, makes it, then
// creates its files one timed operation each.
type prepareOp struct {
	env      *Env
	tree     *Tree
	content  []byte
	next     *atomic.Int64
	existing *atomic.Int64
	dirErrs  *atomic.Int64
	progress *Progress

	dir, k, end int
	path        string
}

func (p *prepareOp) Next(int64) bool {
	for p.dir < 0 || p.k >= p.end {
		d := int(p.next.Add(1) - 1)
		if d >= p.tree.NumDirs() {
			return false
		}
		// Directories are not timed: the result's latency is per file.
		if err := p.env.FS.Mkdirs(context.Background(), p.env.User, p.tree.DirPath(d), meta.DefaultDir); err != nil {
			p.dirErrs.Add(1)
			continue
		}
		p.progress.Add(1)
		p.dir = d
		p.k, p.end = p.tree.DirFiles(d)
	}
	p.path = p.tree.FilePath(p.k)
	p.k++
	return true
}

func (p *prepareOp) Do(ctx context.Context) error {
	err := createFile(ctx, p.env, p.path, p.content, false)
	if errors.Is(err, meta.ErrExists) {
		p.existing.Add(1)
		err = nil
	}
	if err == nil {
		p.progress.Add(1)
	}
	return err
}
