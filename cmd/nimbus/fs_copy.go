package main

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// copyingSuffix names the temporary file a copy writes before renaming it
// into place, as hdfs dfs does: a reader never sees a half-copied file under
// the destination name, and a failed copy leaves the destination as it was.
const copyingSuffix = "._COPYING_"

// cleanupTimeout bounds the removal of a temporary file after a failed copy,
// which runs even when the command's context was cancelled.
const cleanupTimeout = 10 * time.Second

// putJob is what every file of one put shares.
type putJob struct {
	force    bool               // -f: overwrite existing files
	create   meta.CreateOptions // --block-size, --replication
	progress progressOpts       // -v
}

// put copies local files (directories recursively; "-" is stdin) into the
// file system with the server's default block size and replication.
func (sh *shell) put(ctx context.Context, inv *invocation) int {
	return sh.putWith(ctx, inv, meta.CreateOptions{})
}

// putWith is put creating its files with create's BlockSize and Replication
// (zero: the server's defaults). DST may be a file path or an existing
// directory, which receives the sources under their base names. -f
// overwrites existing files; -v shows progress even without a terminal.
func (sh *shell) putWith(ctx context.Context, inv *invocation, create meta.CreateOptions) int {
	srcs, dst := inv.args[:len(inv.args)-1], sh.resolve(inv.args[len(inv.args)-1])
	job := putJob{force: inv.has('f'), create: create, progress: progressOpts{verbose: inv.has('v')}}
	var r results
	dstSt, dstErr := sh.fs.Stat(ctx, sh.user, dst.abs)
	dstIsDir := dstErr == nil && dstSt.IsDir()
	if len(srcs) > 1 && !dstIsDir {
		err := dstErr
		if err == nil {
			err = meta.Errorf("put", dst.abs, meta.ErrNotDir, "several sources need a directory destination")
		}
		sh.report(&r, "put", dst.abs, "", err)
		return sh.finish(&r)
	}
	for _, src := range srcs {
		if src == "-" {
			err := sh.putStream(ctx, sh.stdin, "-", sizeOf(sh.stdin), dst.abs, job)
			sh.report(&r, "put", dst.abs, dst.abs, err)
			continue
		}
		tgt := dst
		if dstIsDir {
			tgt = dst.child(baseName(src))
		}
		fi, err := os.Stat(src)
		if err != nil {
			sh.report(&r, "put", src, tgt.abs, err)
			continue
		}
		if fi.IsDir() {
			sh.putDir(ctx, src, tgt, job, &r)
			continue
		}
		sh.report(&r, "put", tgt.abs, tgt.abs, sh.putFile(ctx, src, tgt.abs, job))
	}
	return sh.finish(&r)
}

func (sh *shell) putFile(ctx context.Context, local, dst string, job putJob) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		return meta.Errorf("put", local, meta.ErrInvalidArgument, "not a regular file")
	}
	size := int64(-1)
	if err == nil {
		size = fi.Size()
	}
	return sh.putStream(ctx, f, local, size, dst, job)
}

// sizeOf is the size of r when it is a regular file (stdin redirected from
// one), else -1.
func sizeOf(r io.Reader) int64 {
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			return fi.Size()
		}
	}
	return -1
}

// putStream uploads r, named src for the progress bar and size bytes long
// (-1: unknown), to dst through dst._COPYING_ and renames it into place.
// Memory stays constant: io.Copy moves a fixed buffer at a time and the
// writer sends fixed-size chunks.
func (sh *shell) putStream(ctx context.Context, r io.Reader, src string, size int64, dst string, job putJob) error {
	force := job.force
	st, err := sh.fs.Stat(ctx, sh.user, dst)
	switch {
	case err == nil && st.IsDir():
		return meta.Errorf("put", dst, meta.ErrIsDir, "")
	case err == nil && !force:
		return meta.Errorf("put", dst, meta.ErrExists, "use -f to overwrite")
	case err != nil && meta.KindOf(err) != meta.KindNotFound:
		return err
	}
	tmp := dst + copyingSuffix
	opts := job.create
	opts.Overwrite = true
	w, err := sh.fs.CreateWriter(ctx, sh.user, tmp, opts)
	if meta.KindOf(err) == meta.KindLease && sh.ownCopy(ctx, tmp) {
		// A put of ours that was killed left its copy open, and its lease
		// would keep this one out until the soft limit: the copy is
		// nobody's work in progress but an abandoned one's (two puts to
		// one destination at once would clash in the rename anyway), so
		// it goes, as HDFS's recoverLease would close it.
		if derr := sh.fs.Delete(ctx, sh.user, tmp, false); derr == nil || meta.KindOf(derr) == meta.KindNotFound {
			w, err = sh.fs.CreateWriter(ctx, sh.user, tmp, opts)
		}
	}
	if err != nil {
		return err
	}
	p := sh.newProgress("put "+src, size, job.progress)
	_, err = io.Copy(w, track(r, p))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	p.finish(err)
	if err == nil {
		err = sh.fs.Rename(ctx, sh.user, tmp, dst, meta.RenameOptions{Overwrite: force})
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_ = sh.fs.Delete(cctx, sh.user, tmp, false) // best effort: the error that matters is err
		cancel()
	}
	return err
}

// ownCopy reports whether tmp is a copy being written that the caller owns:
// one a put of the same user left behind.
func (sh *shell) ownCopy(ctx context.Context, tmp string) bool {
	st, err := sh.fs.Stat(ctx, sh.user, tmp)
	return err == nil && st.Type == meta.TypeFile && st.UnderConstruction && st.Owner == sh.user.Name
}

// putDir copies a local directory tree to dst, which must not exist as a
// file; existing directories are merged into.
func (sh *shell) putDir(ctx context.Context, local string, dst target, job putJob, r *results) {
	err := filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(local, p)
		tgt := dst
		if rel != "." {
			tgt = target{abs: dst.abs + "/" + filepath.ToSlash(rel), disp: dst.disp + "/" + filepath.ToSlash(rel)}
		}
		switch {
		case err != nil:
			sh.report(r, "put", p, tgt.abs, err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
		case d.IsDir():
			if err := sh.fs.Mkdirs(ctx, sh.user, tgt.abs, meta.DefaultDir); err != nil {
				sh.report(r, "put", tgt.abs, tgt.abs, err)
				return fs.SkipDir
			}
		default:
			sh.report(r, "put", tgt.abs, tgt.abs, sh.putFile(ctx, p, tgt.abs, job))
		}
		return ctx.Err()
	})
	if err != nil {
		sh.report(r, "put", local, dst.abs, err)
	}
}

// get copies files (directories recursively) out to the local file system;
// LOCALDST "-" is stdout. An existing local directory receives the sources
// under their base names. -f overwrites existing local files; -v shows
// progress even without a terminal.
func (sh *shell) get(ctx context.Context, inv *invocation) int {
	srcs, dst := sh.resolveAll(inv.args[:len(inv.args)-1]), inv.args[len(inv.args)-1]
	force := inv.has('f')
	po := progressOpts{verbose: inv.has('v')}
	var r results
	if dst == "-" {
		po.stdoutData = true
		for _, s := range srcs {
			sh.report(&r, "get", s.abs, "-", sh.copyOut(ctx, "get", s, -1, sh.stdout, po))
		}
		return sh.finish(&r)
	}
	fi, err := os.Stat(dst)
	dstIsDir := err == nil && fi.IsDir()
	if len(srcs) > 1 && !dstIsDir {
		if err == nil {
			err = meta.Errorf("get", dst, meta.ErrNotDir, "several sources need a local directory destination")
		}
		sh.report(&r, "get", dst, "", err)
		return sh.finish(&r)
	}
	for _, s := range srcs {
		local := dst
		if dstIsDir {
			local = filepath.Join(dst, baseName(s.abs))
		}
		st, err := sh.fs.Stat(ctx, sh.user, s.abs)
		if err != nil {
			sh.report(&r, "get", s.abs, local, err)
			continue
		}
		if !st.IsDir() {
			sh.report(&r, "get", s.abs, local, sh.getFile(ctx, s, st.Length, local, force, po))
			continue
		}
		if !sh.report(&r, "get", s.abs, local, os.MkdirAll(local, 0o755)) {
			continue
		}
		sh.walkBelow(ctx, s, func(cst *meta.FileStatus, c target) error {
			lp := filepath.Join(local, filepath.FromSlash(c.abs[len(s.abs)+1:]))
			switch cst.Type {
			case meta.TypeDir:
				return os.MkdirAll(lp, 0o755)
			case meta.TypeFile:
				err := sh.getFile(ctx, c, cst.Length, lp, force, po)
				if err == nil {
					r.ok("get", c.abs, lp)
				}
				return err
			}
			return nil // symlinks are not copied
		}, func(c target, err error) {
			sh.report(&r, "get", c.abs, "", err)
		})
	}
	return sh.finish(&r)
}

// getFile copies one file, size bytes long, to local through
// local._COPYING_.
func (sh *shell) getFile(ctx context.Context, src target, size int64, local string, force bool, po progressOpts) error {
	if fi, err := os.Stat(local); err == nil {
		if fi.IsDir() {
			return meta.Errorf("get", local, meta.ErrIsDir, "local directory")
		}
		if !force {
			return meta.Errorf("get", local, meta.ErrExists, "local file; use -f to overwrite")
		}
	}
	tmp := local + copyingSuffix
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = sh.copyOut(ctx, "get", src, size, f, po)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, local)
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort: the error that matters is err
	}
	return err
}

// copyOut streams the content of src, size bytes long (-1: unknown), to w,
// with progress for op when po asks for it. The size is looked up only when
// progress could be shown.
func (sh *shell) copyOut(ctx context.Context, op string, src target, size int64, w io.Writer, po progressOpts) error {
	if size < 0 && sh.wantsProgress(po) {
		st, err := sh.fs.Stat(ctx, sh.user, src.abs)
		if err != nil {
			return err
		}
		size = st.Length
	}
	rc, err := sh.fs.OpenReader(ctx, sh.user, src.abs)
	if err != nil {
		return err
	}
	p := sh.newProgress(op+" "+src.disp, size, po)
	_, err = io.Copy(w, track(rc, p))
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	p.finish(err)
	return err
}

// cat writes each file to stdout, in order; -v shows progress on stderr even
// when stdout is the terminal.
func (sh *shell) cat(ctx context.Context, inv *invocation) int {
	po := progressOpts{verbose: inv.has('v'), stdoutData: true}
	for _, t := range sh.resolveAll(inv.args) {
		if err := sh.copyOut(ctx, "cat", t, -1, sh.stdout, po); err != nil {
			sh.fail("cat", t.abs, err)
		}
	}
	return sh.exit()
}
