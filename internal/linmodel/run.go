package linmodel

import (
	"context"
	"errors"

	"github.com/nimbus-fs/nimbus/meta"
)

// Abs maps a model path onto the file system under test: below base, a
// directory that stands for the model's root ("" or "/": the root itself).
func Abs(base, p string) string {
	if base == "" || base == meta.RootPath {
		return p
	}
	if p == meta.RootPath {
		return base
	}
	return base + p
}

// Run executes in on fs, with the model's paths below base, and returns its
// result as the model states it. Create makes a complete empty file
// (meta.CreateFile), so that no lease outlives the call.
func Run(ctx context.Context, fs meta.FileSystem, base string, in Input) Output {
	u := meta.User{Name: in.User}
	p := Abs(base, in.Path)
	var err error
	var out Output
	switch in.Op {
	case Mkdirs:
		err = fs.Mkdirs(ctx, u, p, in.Perm)
	case Create:
		_, err = meta.CreateFile(ctx, fs, u, p, meta.CreateOptions{Perm: in.Perm, Client: "linmodel-" + in.User}, nil)
	case Stat:
		var st *meta.FileStatus
		if st, err = fs.Stat(ctx, u, p); err == nil {
			out.Stat = entry(st, "")
		}
	case List:
		var l *meta.Listing
		if l, err = fs.List(ctx, u, p, "", 0); err == nil {
			out.List = make([]Entry, 0, len(l.Entries))
			for i := range l.Entries {
				out.List = append(out.List, entry(&l.Entries[i], l.Entries[i].Name()))
			}
			if l.Remaining > 0 {
				out.Fault = "list " + p + ": more than one page"
			}
		}
	case Rename:
		err = fs.Rename(ctx, u, p, Abs(base, in.Dst), meta.RenameOptions{})
	case Chmod:
		err = fs.SetPermission(ctx, u, p, in.Perm)
	case Delete:
		err = fs.Delete(ctx, u, p, in.Recursive)
	case SetQuota:
		err = fs.SetQuota(ctx, u, p, in.Quota, 0)
	default:
		return Output{Fault: "unknown operation " + in.Op.String()}
	}
	if err != nil {
		k := meta.KindOf(err)
		if k == meta.KindUnknown || k == meta.KindInternal || k == meta.KindOutcomeUnknown || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return Output{Fault: err.Error()}
		}
		return Output{Err: k}
	}
	return out
}

func entry(st *meta.FileStatus, name string) Entry {
	e := Entry{Name: name, Type: st.Type, Perm: st.Perm, Owner: st.Owner, NsQuota: -1}
	if st.Type == meta.TypeDir {
		e.Children = st.ChildrenNum
		e.NsQuota = st.NsQuota
	}
	return e
}
