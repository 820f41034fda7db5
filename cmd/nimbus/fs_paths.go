package main

import (
	"path"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

// homeDir is where relative paths resolve, as in HDFS: /user/<name>.
func homeDir(u meta.User) string {
	if u.Name == "" {
		return meta.RootPath
	}
	return "/user/" + u.Name
}

// target is one path argument: abs is the absolute path sent to the file
// system, disp the form printed back, which keeps the user's spelling as
// hdfs dfs does (a relative argument lists relative children).
type target struct {
	abs  string
	disp string
}

// resolve makes a user argument absolute: relative paths join the home
// directory; "." and ".." are resolved lexically, as HDFS's Path does. An
// empty argument is left for the file system to reject.
func (sh *shell) resolve(arg string) target {
	if arg == "" {
		return target{abs: "", disp: ""}
	}
	p := arg
	if !strings.HasPrefix(p, "/") {
		p = sh.home + "/" + p
	}
	return target{abs: path.Clean(p), disp: arg}
}

// homeTarget is the implicit argument of ls, du and count without paths.
func (sh *shell) homeTarget() target {
	return target{abs: sh.home, disp: ""}
}

// child returns the target of an entry named name inside t.
func (t target) child(name string) target {
	var d string
	switch {
	case t.disp == "" || t.disp == ".":
		d = name
	case strings.HasSuffix(t.disp, "/"):
		d = t.disp + name
	default:
		d = t.disp + "/" + name
	}
	return target{abs: meta.JoinPath(t.abs, name), disp: d}
}

// shown is the path printed for t: its display form, or "." for the home
// directory given implicitly.
func (t target) shown() string {
	if t.disp == "" {
		return "."
	}
	return t.disp
}

// resolveAll resolves every argument.
func (sh *shell) resolveAll(args []string) []target {
	ts := make([]target, len(args))
	for i, a := range args {
		ts[i] = sh.resolve(a)
	}
	return ts
}

// baseName is the last component of a path (local or remote), ignoring
// trailing slashes.
func baseName(p string) string {
	p = strings.TrimRight(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
