package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

// setfacl, getfacl, setfattr, getfattr: HDFS's AclCommands and
// XAttrCommands, with their flags and their output, over the file
// system's ACLs and XAttrs. Their flags take values, so they
// parse their own arguments (the table passes them through raw).

// capability returns the file system the shell talks to, unwrapped from
// the streaming adapter, for a type assertion.
func (sh *shell) capability() any {
	if s, ok := sh.fs.(streamFS); ok {
		return s.FileSystem
	}
	return sh.fs
}

// setfacl [-R] {-m|-x} ACLSPEC PATH | [-R] {-b|-k} PATH | [-R] --set ACLSPEC PATH
func (sh *shell) setfacl(ctx context.Context, inv *invocation) int {
	args := inv.args
	recursive := false
	var mode string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-R":
			recursive = true
		case "-m", "-x", "-b", "-k", "--set":
			if mode != "" {
				return sh.usageError(inv, "only one of -m, -x, -b, -k and --set")
			}
			mode = args[0]
		default:
			return sh.usageError(inv, "unknown flag %q", args[0])
		}
		args = args[1:]
	}
	if mode == "" {
		return sh.usageError(inv, "give one of -m, -x, -b, -k or --set")
	}
	var entries []meta.AclEntry
	if mode == "-m" || mode == "-x" || mode == "--set" {
		if len(args) != 2 {
			return sh.usageError(inv, "%s takes ACLSPEC PATH", mode)
		}
		var err error
		if entries, err = meta.ParseAclSpec(args[0], mode != "-x"); err != nil {
			return sh.usageError(inv, "%v", err)
		}
		if len(entries) == 0 {
			return sh.usageError(inv, "empty ACLSPEC")
		}
		args = args[1:]
	}
	if len(args) != 1 {
		return sh.usageError(inv, "%s takes one PATH", mode)
	}
	t := sh.resolve(args[0])
	a := sh.fs
	set := func(st *meta.FileStatus, t target) error {
		switch mode {
		case "-m":
			// A default entry applies to directories only: -R -m with
			// defaults sets them on the directories below and the access
			// entries on every inode, as HDFS's setfacl does.
			es := entries
			if !st.IsDir() {
				es = accessOnly(entries)
			}
			return a.ModifyAclEntries(ctx, sh.user, t.abs, es)
		case "-x":
			return a.RemoveAclEntries(ctx, sh.user, t.abs, entries)
		case "-b":
			return a.RemoveAcl(ctx, sh.user, t.abs)
		case "-k":
			return a.RemoveDefaultAcl(ctx, sh.user, t.abs)
		}
		es := entries
		if !st.IsDir() {
			es = accessOnly(entries)
		}
		return a.SetAcl(ctx, sh.user, t.abs, es)
	}
	if recursive {
		inv.flags['R'] = true
	}
	var r results
	sh.eachRecursive(ctx, inv, "setfacl", []target{t}, &r, set)
	return sh.finish(&r)
}

func accessOnly(es []meta.AclEntry) []meta.AclEntry {
	var out []meta.AclEntry
	for _, e := range es {
		if e.Scope == meta.AclAccess {
			out = append(out, e)
		}
	}
	return out
}

// getfacl [-R] PATH: HDFS's output, a blank line after each path.
func (sh *shell) getfacl(ctx context.Context, inv *invocation) int {
	args := inv.args
	if len(args) == 2 && args[0] == "-R" {
		inv.flags['R'] = true
		args = args[1:]
	}
	if len(args) != 1 || strings.HasPrefix(args[0], "-") && args[0] != "-" {
		return sh.usageError(inv, "takes [-R] PATH")
	}
	t := sh.resolve(args[0])
	var r results
	show := func(st *meta.FileStatus, t target) error {
		var es []meta.AclEntry
		// As HDFS's getfacl, only a path with an ACL asks for it: the
		// others print the ACL their bits make, on any server.
		if st.AclBit {
			as, err := sh.fs.GetAclStatus(ctx, sh.user, t.abs)
			if err != nil {
				return err
			}
			es = as.Entries
		}
		fmt.Fprint(sh.stdout, formatGetfacl(t.shown(), st, es))
		return nil
	}
	json := sh.json
	sh.json = false // the output is HDFS's text; errors are reported as usual
	sh.eachRecursive(ctx, inv, "getfacl", []target{t}, &r, show)
	sh.json = json
	if sh.failed {
		return 1
	}
	return 0
}

// formatGetfacl renders one path as `hdfs dfs -getfacl` does (AclCommands.
// GetfaclCommand): the header from the status, the ACL rebuilt from the
// permission bits and the extended entries, and "#effective:" after an
// entry the mask limits.
func formatGetfacl(disp string, st *meta.FileStatus, entries []meta.AclEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# file: %s\n# owner: %s\n# group: %s\n", disp, st.Owner, st.Group)
	p := st.Perm
	if p&meta.StickyBit != 0 {
		if p&1 != 0 {
			b.WriteString("# flags: --t\n")
		} else {
			b.WriteString("# flags: --T\n")
		}
	}
	// AclUtil.getAclFromPermAndEntries.
	acl := []meta.AclEntry{{Type: meta.AclUser, Perm: p >> 6 & 7}}
	i, hasAccess := 0, false
	for ; i < len(entries) && entries[i].Scope == meta.AclAccess; i++ {
		acl = append(acl, entries[i])
		hasAccess = true
	}
	if hasAccess {
		acl = append(acl, meta.AclEntry{Type: meta.AclMask, Perm: p >> 3 & 7})
	} else {
		acl = append(acl, meta.AclEntry{Type: meta.AclGroup, Perm: p >> 3 & 7})
	}
	acl = append(acl, meta.AclEntry{Type: meta.AclOther, Perm: p & 7})
	access := acl
	def := entries[i:]
	for _, scope := range [][]meta.AclEntry{access, def} {
		if len(scope) == 0 {
			continue
		}
		mask, hasMask := meta.Perm(7), false
		for _, e := range scope {
			if e.Type == meta.AclMask {
				mask, hasMask = e.Perm, true
			}
		}
		for _, e := range scope {
			limited := e.Name != "" || e.Type == meta.AclGroup
			if len(scope) > 3 && hasMask && limited && e.Perm&mask != e.Perm {
				fmt.Fprintf(&b, "%s\t#effective:%s\n", e, meta.FsActionString(e.Perm&mask))
			} else {
				b.WriteString(e.String() + "\n")
			}
		}
	}
	b.WriteString("\n")
	return b.String()
}

// setfattr {-n NAME [-v VALUE] | -x NAME} PATH
func (sh *shell) setfattr(ctx context.Context, inv *invocation) int {
	args := inv.args
	var name, remove string
	var value []byte
	for len(args) > 1 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-n":
			name = args[1]
		case "-v":
			v, err := meta.DecodeXAttrValue(args[1])
			if err != nil {
				return sh.usageError(inv, "%v", err)
			}
			value = v
		case "-x":
			remove = args[1]
		default:
			return sh.usageError(inv, "unknown flag %q", args[0])
		}
		args = args[2:]
	}
	if len(args) != 1 || (name == "") == (remove == "") {
		return sh.usageError(inv, "give -n NAME [-v VALUE] or -x NAME, and one PATH")
	}
	t := sh.resolve(args[0])
	var r results
	var err error
	if remove != "" {
		err = sh.fs.RemoveXAttr(ctx, sh.user, t.abs, remove)
	} else {
		err = sh.fs.SetXAttr(ctx, sh.user, t.abs, meta.XAttr{Name: name, Value: value}, meta.XAttrCreate|meta.XAttrReplace)
	}
	sh.report(&r, "setfattr", t.disp, "", err)
	return sh.finish(&r)
}

// getfattr [-R] {-n NAME | -d} [-e ENCODING] PATH
func (sh *shell) getfattr(ctx context.Context, inv *invocation) int {
	args := inv.args
	var name string
	dump := false
	enc := meta.XAttrText
	for len(args) > 1 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-R":
			inv.flags['R'] = true
			args = args[1:]
			continue
		case "-d":
			dump = true
			args = args[1:]
			continue
		case "-n":
			name = args[1]
		case "-e":
			e, err := meta.ParseXAttrEncoding(args[1])
			if err != nil {
				return sh.usageError(inv, "%v", err)
			}
			enc = e
		default:
			return sh.usageError(inv, "unknown flag %q", args[0])
		}
		args = args[2:]
	}
	if len(args) != 1 || dump == (name != "") {
		return sh.usageError(inv, "give -n NAME or -d, and one PATH")
	}
	t := sh.resolve(args[0])
	x := sh.fs
	var r results
	show := func(_ *meta.FileStatus, t target) error {
		var names []string
		if !dump {
			names = []string{name}
		}
		xs, err := x.GetXAttrs(ctx, sh.user, t.abs, names)
		if err != nil {
			return err
		}
		// HDFS prints a map in hash order; Nimbus sorts, so that the
		// output is the same from run to run.
		sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
		var b strings.Builder
		fmt.Fprintf(&b, "# file: %s\n", t.shown())
		for _, a := range xs {
			if len(a.Value) == 0 {
				b.WriteString(a.Name + "\n")
			} else {
				b.WriteString(a.Name + "=" + meta.EncodeXAttrValue(a.Value, enc) + "\n")
			}
		}
		fmt.Fprint(sh.stdout, b.String())
		return nil
	}
	json := sh.json
	sh.json = false
	sh.eachRecursive(ctx, inv, "getfattr", []target{t}, &r, show)
	sh.json = json
	if sh.failed {
		return 1
	}
	return 0
}
