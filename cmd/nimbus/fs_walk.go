package main

import (
	"context"

	"github.com/nimbus-fs/nimbus/meta"
)

// listPage is the page size asked of List; the server may cap it lower.
const listPage = 1000

// listAll returns every entry of directory dir, following List's pages.
func (sh *shell) listAll(ctx context.Context, dir string) ([]meta.FileStatus, error) {
	var all []meta.FileStatus
	after := ""
	for {
		l, err := sh.fs.List(ctx, sh.user, dir, after, listPage)
		if err != nil {
			return nil, err
		}
		all = append(all, l.Entries...)
		if l.Remaining <= 0 || len(l.Entries) == 0 {
			return all, nil
		}
		after = l.Entries[len(l.Entries)-1].Name()
	}
}

// listPages calls fn with each page of directory dir's entries, in name
// order, as the pages arrive: a caller that does not keep them holds one
// page at a time, whatever the directory's size.
func (sh *shell) listPages(ctx context.Context, dir string, fn func(page []meta.FileStatus) error) error {
	after := ""
	for {
		l, err := sh.fs.List(ctx, sh.user, dir, after, listPage)
		if err != nil {
			return err
		}
		if len(l.Entries) > 0 {
			if err := fn(l.Entries); err != nil {
				return err
			}
		}
		if l.Remaining <= 0 || len(l.Entries) == 0 {
			return nil
		}
		after = l.Entries[len(l.Entries)-1].Name()
	}
}

// walkBelow calls fn for every inode below directory t, depth first, each
// directory before its children, children in name order; it does not
// follow symlinks. A directory that cannot be listed is reported through
// onErr and skipped; the walk goes on. fn's error is reported the same way.
func (sh *shell) walkBelow(ctx context.Context, t target, fn func(st *meta.FileStatus, t target) error, onErr func(t target, err error)) {
	entries, err := sh.listAll(ctx, t.abs)
	if err != nil {
		onErr(t, err)
		return
	}
	for i := range entries {
		st := &entries[i]
		c := t.child(st.Name())
		if err := fn(st, c); err != nil {
			onErr(c, err)
			continue
		}
		if st.IsDir() {
			if ctx.Err() != nil {
				onErr(c, ctx.Err())
				return
			}
			sh.walkBelow(ctx, c, fn, onErr)
		}
	}
}
