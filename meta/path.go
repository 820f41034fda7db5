package meta

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits on names and paths, as HDFS sets them by default.
const (
	MaxNameLen = 255  // bytes in one path component
	MaxPathLen = 8000 // bytes in a whole path
	MaxDepth   = 1000 // components in a path
	PathSep    = "/"
	RootPath   = "/"
	DotName    = "."
	DotDotName = ".."
)

// CleanPath checks that p is an absolute path whose every component is a valid
// name, and returns it in canonical form: one slash between components and no
// trailing slash (except for the root, "/"). Repeated and trailing slashes are
// accepted and removed; "." and ".." components are rejected rather than
// interpreted, as HDFS does. The error wraps ErrInvalidPath and says why.
func CleanPath(op, p string) (string, error) {
	if p == "" {
		return "", Errorf(op, p, ErrInvalidPath, "empty path")
	}
	if p[0] != '/' {
		return "", Errorf(op, p, ErrInvalidPath, "path must be absolute")
	}
	if len(p) > MaxPathLen {
		return "", Errorf(op, p[:64]+"...", ErrInvalidPath, "path longer than %d bytes", MaxPathLen)
	}
	if canonicalASCII(p) {
		return p, nil
	}
	return cleanPathSlow(op, p)
}

// cleanPathSlow is CleanPath for an absolute path of at most MaxPathLen
// bytes that canonicalASCII did not accept.
func cleanPathSlow(op, p string) (string, error) {
	if !utf8.ValidString(p) {
		return "", Errorf(op, p, ErrInvalidPath, "path is not valid UTF-8")
	}
	clean := true
	for i := 1; i < len(p); i++ {
		if p[i] == '/' && (p[i-1] == '/' || i == len(p)-1) {
			clean = false
			break
		}
	}
	if !clean {
		var b strings.Builder
		b.Grow(len(p))
		for i := 0; i < len(p); i++ {
			if p[i] == '/' && b.Len() > 0 && b.String()[b.Len()-1] == '/' {
				continue
			}
			b.WriteByte(p[i])
		}
		p = b.String()
		if len(p) > 1 && p[len(p)-1] == '/' {
			p = p[:len(p)-1]
		}
	}
	if p == RootPath {
		return p, nil
	}
	depth := 0
	for rest := p[1:]; ; {
		i := strings.IndexByte(rest, '/')
		name := rest
		if i >= 0 {
			name = rest[:i]
		}
		if err := checkName(name); err != "" {
			return "", Errorf(op, p, ErrInvalidPath, "%s", err)
		}
		depth++
		if depth > MaxDepth {
			return "", Errorf(op, p, ErrInvalidPath, "deeper than %d components", MaxDepth)
		}
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	return p, nil
}

// canonicalASCII reports whether absolute path p is already what CleanPath
// returns for it, in one pass over its bytes: ASCII without NUL, no empty,
// "." or ".." component, none longer than MaxNameLen, at most MaxDepth of
// them. It runs before every operation (and again to route it), so the
// usual path skips CleanPath's separate passes; whatever it does not
// accept, CleanPath checks the slow way, for its error or its rewrite.
func canonicalASCII(p string) bool {
	if p == RootPath {
		return true
	}
	start, depth := 1, 0 // start: the current component's first byte
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			b := p[i]
			if b == 0 || b >= utf8.RuneSelf {
				return false
			}
			if b != '/' {
				continue
			}
		}
		switch n := i - start; {
		case n == 0 || n > MaxNameLen:
			return false
		case n <= 2 && p[start] == '.' && (n == 1 || p[start+1] == '.'):
			return false
		}
		if depth++; depth > MaxDepth {
			return false
		}
		start = i + 1
	}
	return true
}

// ValidName reports whether name can be one path component; the error wraps
// ErrInvalidPath.
func ValidName(op, name string) error {
	if msg := checkName(name); msg != "" {
		return Errorf(op, name, ErrInvalidPath, "%s", msg)
	}
	if !utf8.ValidString(name) {
		return Errorf(op, name, ErrInvalidPath, "name is not valid UTF-8")
	}
	return nil
}

func checkName(name string) string {
	switch {
	case name == "":
		return "empty path component"
	case name == DotName || name == DotDotName:
		return `"." and ".." are not allowed as path components`
	case len(name) > MaxNameLen:
		return "path component longer than 255 bytes"
	case strings.IndexByte(name, 0) >= 0:
		return "NUL byte in path"
	case strings.IndexByte(name, '/') >= 0:
		return "'/' in a name"
	}
	return ""
}

// SplitPath returns the components of a clean path ("/" has none).
func SplitPath(clean string) []string {
	if clean == RootPath {
		return nil
	}
	return strings.Split(clean[1:], PathSep)
}

// ParentPath returns the parent of a clean path and its last component.
// The root's parent is itself, with an empty name.
func ParentPath(clean string) (parent, name string) {
	if clean == RootPath {
		return RootPath, ""
	}
	i := strings.LastIndexByte(clean, '/')
	if i == 0 {
		return RootPath, clean[1:]
	}
	return clean[:i], clean[i+1:]
}

// JoinPath appends name to a clean directory path.
func JoinPath(dir, name string) string {
	if dir == RootPath {
		return RootPath + name
	}
	return dir + PathSep + name
}

// IsAncestor reports whether clean path a is a proper ancestor of clean path b.
func IsAncestor(a, b string) bool {
	if a == RootPath {
		return b != RootPath
	}
	return len(b) > len(a) && b[len(a)] == '/' && b[:len(a)] == a
}

// PagePaths writes the paths of a listing page one after another into one
// string, so that each entry's path is a slice of it: one allocation per page
// instead of one per entry. The engine builds its pages with it, and the RPC
// client its copies of the pages it receives.
type PagePaths struct {
	b    strings.Builder
	ends []int
}

// Grow reserves room for n more paths of about size bytes each.
func (p *PagePaths) Grow(n, size int) {
	p.b.Grow(n * size)
	p.ends = slices.Grow(p.ends, n)
}

// Add appends the next entry's path: the concatenation of parts.
func (p *PagePaths) Add(parts ...string) {
	for _, s := range parts {
		p.b.WriteString(s)
	}
	p.ends = append(p.ends, p.b.Len())
}

// SetPaths gives entries[i] the i-th path added; entries has one per path.
func (p *PagePaths) SetPaths(entries []FileStatus) {
	all, start := p.b.String(), 0
	for i, end := range p.ends {
		entries[i].Path = all[start:end]
		start = end
	}
}
