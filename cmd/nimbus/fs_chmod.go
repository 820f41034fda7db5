package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

var errBadMode = errors.New("invalid mode")

// modeChange is a parsed chmod MODE: either an absolute octal mode or a list
// of symbolic clauses applied in order.
type modeChange struct {
	octal   bool
	perm    meta.Perm // octal
	actions []modeAction
}

// modeAction is one operator of a symbolic clause ("u+x" is one, "u+x-w" two).
type modeAction struct {
	who    meta.Perm // rwx bits of the selected classes (0700 u, 0070 g, 0007 o)
	sticky bool      // the classes include "other", so t applies
	op     byte      // '+', '-', '='
	bits   meta.Perm // from r, w, x
	condX  bool      // X: execute if a directory or already executable by someone
	t      bool      // the sticky bit
}

// parseMode parses a chmod MODE. Octal: one to four digits, at most 1777
// (setuid and setgid do not exist in HDFS). Symbolic, as POSIX chmod:
// comma-separated clauses [ugoa]*([-+=][rwxXt]*)+ ; no classes means a;
// "t" (sticky) applies when the classes include other.
func parseMode(s string) (*modeChange, error) {
	if s == "" {
		return nil, fmt.Errorf("%w %q: empty", errBadMode, s)
	}
	if s[0] >= '0' && s[0] <= '9' {
		if len(s) > 4 {
			return nil, fmt.Errorf("%w %q: more than four octal digits", errBadMode, s)
		}
		v, err := strconv.ParseUint(s, 8, 16)
		if err != nil {
			return nil, fmt.Errorf("%w %q: not an octal number", errBadMode, s)
		}
		if meta.Perm(v)&^meta.PermMask != 0 {
			return nil, fmt.Errorf("%w %q: only permission bits and the sticky bit (1000) may be set", errBadMode, s)
		}
		return &modeChange{octal: true, perm: meta.Perm(v)}, nil
	}
	m := &modeChange{}
	for _, clause := range strings.Split(s, ",") {
		i := 0
		var who meta.Perm
		sticky := false
		for ; i < len(clause); i++ {
			switch clause[i] {
			case 'u':
				who |= 0o700
			case 'g':
				who |= 0o070
			case 'o':
				who |= 0o007
				sticky = true
			case 'a':
				who |= 0o777
				sticky = true
			default:
				goto ops
			}
		}
	ops:
		if who == 0 {
			who, sticky = 0o777, true
		}
		if i == len(clause) {
			return nil, fmt.Errorf("%w %q: clause %q has no operator (+, - or =)", errBadMode, s, clause)
		}
		for i < len(clause) {
			a := modeAction{who: who, sticky: sticky, op: clause[i]}
			if a.op != '+' && a.op != '-' && a.op != '=' {
				return nil, fmt.Errorf("%w %q: unexpected %q in clause %q", errBadMode, s, clause[i], clause)
			}
			for i++; i < len(clause) && !strings.ContainsRune("+-=", rune(clause[i])); i++ {
				switch clause[i] {
				case 'r':
					a.bits |= 0o444
				case 'w':
					a.bits |= 0o222
				case 'x':
					a.bits |= 0o111
				case 'X':
					a.condX = true
				case 't':
					a.t = true
				default:
					return nil, fmt.Errorf("%w %q: unexpected %q in clause %q", errBadMode, s, clause[i], clause)
				}
			}
			m.actions = append(m.actions, a)
		}
	}
	return m, nil
}

// apply returns the mode that results from applying m to old on an inode
// that is a directory or not.
func (m *modeChange) apply(old meta.Perm, isDir bool) meta.Perm {
	if m.octal {
		return m.perm
	}
	p := old & meta.PermMask
	for _, a := range m.actions {
		bits := a.bits
		if a.condX && (isDir || p&0o111 != 0) {
			bits |= 0o111
		}
		bits &= a.who
		var st meta.Perm
		if a.t && a.sticky {
			st = meta.StickyBit
		}
		switch a.op {
		case '+':
			p |= bits | st
		case '-':
			p &^= bits | st
		case '=':
			p &^= a.who
			if a.sticky {
				p &^= meta.StickyBit
			}
			p |= bits | st
		}
	}
	return p
}

// chmod sets the mode of each path (and with -R of everything below it,
// symlinks excepted).
func (sh *shell) chmod(ctx context.Context, inv *invocation) int {
	m, err := parseMode(inv.args[0])
	if err != nil {
		return sh.usageError(inv, "%v", err)
	}
	var r results
	ts := sh.resolveAll(inv.args[1:])
	// An absolute mode is the same on every inode: the server sets it in
	// one operation if it can. A symbolic one depends on each inode's mode
	// and type: the walk applies it.
	if ra, ok := sh.capability().(meta.RecursiveAttrs); ok && inv.has('R') && m.octal {
		ts = sh.eachOnServer("chmod", ts, &r, func(t target) error {
			return ra.SetPermissionRecursive(ctx, sh.user, t.abs, m.perm)
		})
	}
	set := func(st *meta.FileStatus, t target) error {
		return sh.fs.SetPermission(ctx, sh.user, t.abs, m.apply(st.Perm, st.IsDir()))
	}
	sh.eachRecursive(ctx, inv, "chmod", ts, &r, set)
	return sh.finish(&r)
}

// eachOnServer runs a recursive change of each target as one operation of
// the server (meta.RecursiveAttrs), one result per target, and returns the
// targets left to walk: all from the first the server answers it cannot do
// (a server that does not know the request), as an HDFS client walks.
func (sh *shell) eachOnServer(op string, ts []target, r *results, fn func(t target) error) []target {
	for i, t := range ts {
		err := fn(t)
		if meta.KindOf(err) == meta.KindUnsupported {
			return ts[i:]
		}
		sh.report(r, op, t.abs, "", err)
	}
	return nil
}

// parseOwner parses OWNER[:GROUP] (also ":GROUP" and "OWNER:"); at least one
// must be given and neither may contain white space or a second ':'.
func parseOwner(s string) (owner, group string, err error) {
	owner, group, _ = strings.Cut(s, ":")
	if strings.ContainsAny(s, " \t\n") || strings.Contains(group, ":") {
		return "", "", fmt.Errorf("invalid owner %q", s)
	}
	if owner == "" && group == "" {
		return "", "", fmt.Errorf("invalid owner %q: give OWNER, OWNER:GROUP or :GROUP", s)
	}
	return owner, group, nil
}

// chown sets the owner and/or group of each path (-R: and below it).
func (sh *shell) chown(ctx context.Context, inv *invocation) int {
	owner, group, err := parseOwner(inv.args[0])
	if err != nil {
		return sh.usageError(inv, "%v", err)
	}
	var r results
	ts := sh.resolveAll(inv.args[1:])
	if ra, ok := sh.capability().(meta.RecursiveAttrs); ok && inv.has('R') {
		ts = sh.eachOnServer("chown", ts, &r, func(t target) error {
			return ra.SetOwnerRecursive(ctx, sh.user, t.abs, owner, group)
		})
	}
	set := func(_ *meta.FileStatus, t target) error {
		return sh.fs.SetOwner(ctx, sh.user, t.abs, owner, group)
	}
	sh.eachRecursive(ctx, inv, "chown", ts, &r, set)
	return sh.finish(&r)
}

// eachRecursive applies fn to every target and, with -R, to every inode
// below a directory target except symlinks, recording one result per inode
// changed or failed.
func (sh *shell) eachRecursive(ctx context.Context, inv *invocation, op string, ts []target, r *results,
	fn func(st *meta.FileStatus, t target) error) {
	for _, t := range ts {
		st, err := sh.fs.Stat(ctx, sh.user, t.abs)
		if err == nil {
			err = fn(st, t)
		}
		if !sh.report(r, op, t.abs, "", err) || !inv.has('R') || !st.IsDir() {
			continue
		}
		sh.walkBelow(ctx, t, func(cst *meta.FileStatus, c target) error {
			if cst.Type == meta.TypeSymlink {
				return nil
			}
			if err := fn(cst, c); err != nil {
				return err
			}
			r.ok(op, c.abs, "")
			return nil
		}, func(c target, err error) {
			sh.report(r, op, c.abs, "", err)
		})
	}
}
