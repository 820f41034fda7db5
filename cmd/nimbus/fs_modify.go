package main

import (
	"context"
	"fmt"

	"github.com/nimbus-fs/nimbus/meta"
)

// mkdir creates each directory. With -p, missing parents are created and an
// existing directory is fine (Mkdirs). Without it, as in hdfs dfs -mkdir, the
// parent must exist and the path must not.
func (sh *shell) mkdir(ctx context.Context, inv *invocation) int {
	var r results
	for _, t := range sh.resolveAll(inv.args) {
		err := sh.mkdirOne(ctx, t.abs, inv.has('p'))
		sh.report(&r, "mkdir", t.abs, "", err)
	}
	return sh.finish(&r)
}

func (sh *shell) mkdirOne(ctx context.Context, p string, parents bool) error {
	if !parents {
		clean, err := meta.CleanPath("mkdir", p)
		if err != nil {
			return err
		}
		if _, err := sh.fs.Stat(ctx, sh.user, clean); err == nil {
			return meta.Errorf("mkdir", clean, meta.ErrExists, "")
		} else if meta.KindOf(err) != meta.KindNotFound {
			return err
		}
		parent, _ := meta.ParentPath(clean)
		pst, err := sh.fs.Stat(ctx, sh.user, parent)
		if meta.KindOf(err) == meta.KindNotFound {
			return meta.Errorf("mkdir", clean, meta.ErrNotFound, "parent %s does not exist; use -p", parent)
		}
		if err != nil {
			return err
		}
		if !pst.IsDir() {
			return meta.Errorf("mkdir", clean, meta.ErrNotDir, "parent %s is not a directory", parent)
		}
	}
	return sh.fs.Mkdirs(ctx, sh.user, p, meta.DefaultDir)
}

// touch creates each path as an empty file, or sets the modification and
// access times of an existing file to now. A directory is refused.
func (sh *shell) touch(ctx context.Context, inv *invocation) int {
	var r results
	for _, t := range sh.resolveAll(inv.args) {
		sh.report(&r, "touch", t.abs, "", sh.touchOne(ctx, t.abs))
	}
	return sh.finish(&r)
}

func (sh *shell) touchOne(ctx context.Context, p string) error {
	st, err := sh.fs.Stat(ctx, sh.user, p)
	switch {
	case err == nil && st.IsDir():
		return meta.Errorf("touch", p, meta.ErrIsDir, "")
	case err == nil:
		now := sh.now().UnixMilli()
		return sh.fs.SetTimes(ctx, sh.user, p, now, now)
	case meta.KindOf(err) != meta.KindNotFound:
		return err
	}
	w, err := sh.fs.CreateWriter(ctx, sh.user, p, meta.CreateOptions{})
	if err == nil {
		err = w.Close()
	}
	if meta.KindOf(err) == meta.KindExists { // created meanwhile: touch it
		now := sh.now().UnixMilli()
		return sh.fs.SetTimes(ctx, sh.user, p, now, now)
	}
	return err
}

// mv renames each source to the destination; with several sources the
// destination must be an existing directory. An existing directory
// receives the source inside it; an existing file is an error.
func (sh *shell) mv(ctx context.Context, inv *invocation) int {
	ts := sh.resolveAll(inv.args)
	srcs, dst := ts[:len(ts)-1], ts[len(ts)-1]
	var r results
	if len(srcs) > 1 {
		st, err := sh.fs.Stat(ctx, sh.user, dst.abs)
		if err == nil && !st.IsDir() {
			err = meta.Errorf("mv", dst.abs, meta.ErrNotDir, "several sources need a directory destination")
		}
		if err != nil {
			sh.report(&r, "mv", dst.abs, "", err)
			return sh.finish(&r)
		}
	}
	for _, s := range srcs {
		err := sh.fs.Rename(ctx, sh.user, s.abs, dst.abs, meta.RenameOptions{})
		sh.report(&r, "mv", s.abs, dst.abs, err)
	}
	return sh.finish(&r)
}

// rm deletes each path and prints "Deleted PATH" as hdfs dfs -rm does
// (there is no trash). A directory needs -r (or -R); -f ignores missing
// paths.
func (sh *shell) rm(ctx context.Context, inv *invocation) int {
	recursive := inv.has('r') || inv.has('R')
	force := inv.has('f')
	var r results
	for _, t := range sh.resolveAll(inv.args) {
		st, err := sh.fs.Stat(ctx, sh.user, t.abs)
		if err == nil && st.IsDir() && !recursive {
			err = meta.Errorf("rm", t.abs, meta.ErrIsDir, "use -r to delete a directory")
		}
		if err == nil {
			err = sh.fs.Delete(ctx, sh.user, t.abs, recursive)
		}
		if err != nil && force && meta.KindOf(err) == meta.KindNotFound {
			continue
		}
		if sh.report(&r, "rm", t.abs, "", err) && !sh.json {
			fmt.Fprintf(sh.stdout, "Deleted %s\n", t.shown())
		}
	}
	return sh.finish(&r)
}
