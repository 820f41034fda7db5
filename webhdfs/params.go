package webhdfs

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// query holds a request's parameters with lower-cased names (Hadoop's
// ParamFilter lower-cases them too) and the first value of each.
type query map[string]string

// target is what parseTarget extracts from a request line.
type target struct {
	op   string // upper-cased op name, "" when absent
	path string // clean absolute path
	q    query
}

// parseTarget splits a WebHDFS request into op, path and parameters. It never
// looks at the op table, so the fuzz target can drive it alone.
func parseTarget(urlPath, rawQuery string) (target, error) {
	var t target
	q, err := parseQuery(rawQuery)
	if err != nil {
		// Hadoop rejects malformed query strings before looking at them; the
		// error names the bad escape (url.EscapeError quotes it).
		return t, meta.Errorf("webhdfs", urlPath, meta.ErrInvalidArgument, "malformed query string: %v", err)
	}
	t.q = q
	t.op = strings.ToUpper(strings.TrimSpace(t.q["op"]))
	p, ok := strings.CutPrefix(urlPath, PathPrefix)
	if !ok || (p != "" && p[0] != '/') {
		return t, meta.Errorf("webhdfs", urlPath, meta.ErrInvalidPath, "not under %s", PathPrefix)
	}
	if p == "" {
		p = meta.RootPath
	}
	// HDFS refuses a path with an empty component ("//") as an invalid path
	// name, as it does "." and ".." (CleanPath's check); only a trailing
	// slash is tolerated. Nimbus must not act on another path than the one
	// the client named.
	if strings.Contains(p, "//") {
		return t, meta.Errorf(strings.ToLower(t.op), p, meta.ErrInvalidPath, "Invalid path name: empty path component")
	}
	t.path, err = meta.CleanPath(strings.ToLower(t.op), p)
	return t, err
}

// parseQuery reads a raw query string in request order, lower-casing each
// name and keeping the first value given under it in any case, so that
// "op=OPEN&OP=DELETE" is always an OPEN. (Hadoop's ParamFilter lower-cases
// names too, and a parameter given twice takes its first value; ranging over
// url.ParseQuery's map, as this gateway once did, made the answer change from
// one request to the next.) It accepts and rejects exactly what
// url.ParseQuery does; the fuzz target checks both.
func parseQuery(raw string) (query, error) {
	q := make(query, 4)
	var firstErr error
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		k, v, err := queryPair(pair)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if lk := strings.ToLower(k); !q.has(lk) {
			q[lk] = v
		}
	}
	return q, firstErr
}

// queryPair unescapes one name=value pair of a query string as
// url.ParseQuery does, semicolons refused.
func queryPair(pair string) (name, value string, err error) {
	if strings.Contains(pair, ";") {
		return "", "", errors.New("invalid semicolon separator in query")
	}
	name, value, _ = strings.Cut(pair, "=")
	if name, err = url.QueryUnescape(name); err != nil {
		return "", "", err
	}
	value, err = url.QueryUnescape(value)
	return name, value, err
}

func (q query) has(name string) bool { _, ok := q[name]; return ok }

// str returns the parameter or def when absent or empty.
func (q query) str(name, def string) string {
	if v := q[name]; v != "" {
		return v
	}
	return def
}

// boolean parses "true"/"false" in any case, as Hadoop's BooleanParam.
func (q query) boolean(op, path, name string, def bool) (bool, error) {
	v := q[name]
	switch strings.ToLower(v) {
	case "":
		return def, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, argError(op, path, name, v, "want true or false")
}

// int64 parses a decimal integer >= min; absent or empty gives def.
func (q query) int64(op, path, name string, def, min int64) (int64, error) {
	v := q[name]
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, argError(op, path, name, v, "not a 64-bit integer")
	}
	if n < min {
		return 0, argError(op, path, name, v, "must be >= "+strconv.FormatInt(min, 10))
	}
	return n, nil
}

// perm parses an octal permission of at most 01777, as Hadoop's
// PermissionParam; "null", the parameter's default on the wire, is no value.
func (q query) perm(op, path, name string, def meta.Perm) (meta.Perm, error) {
	v := q[name]
	if v == "" || v == "null" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 8, 16)
	if err != nil || n > uint64(meta.PermMask) {
		return 0, argError(op, path, name, v, "want an octal permission between 0 and 1777")
	}
	return meta.Perm(n), nil
}

// unmasked parses unmaskedpermission, the mode a client asked for before
// applying its umask (HDFS-6962; Hadoop's client sends it beside
// permission on CREATE and MKDIRS), validated as permission is. ok is false
// when it is absent, empty or "null", as for a client that predates it.
func (q query) unmasked(op, path string) (perm meta.Perm, ok bool, err error) {
	if v := q["unmaskedpermission"]; v == "" || v == "null" {
		return 0, false, nil
	}
	perm, err = q.perm(op, path, "unmaskedpermission", 0)
	return perm, err == nil, err
}

// requiredParam is HDFS's answer (NamenodeWebHdfsMethods.validateOpParams)
// to a parameter an op needs that is absent or empty: 400
// IllegalArgumentException, HDFS's words first, the operation and path
// after them.
func requiredParam(rq *request, name string) error {
	return &wireError{ex: wire.ExceptionOf(meta.KindInvalidArgument),
		msg: "Required param " + name + " for op: " + rq.op.name + " is null or empty (" + rq.op.lower + " " + rq.path + ")"}
}

// replication parses a replication factor in 1..32767 (Hadoop's short).
func (q query) replication(op, path string) (uint16, error) {
	n, err := q.int64(op, path, "replication", 0, 0)
	if err != nil {
		return 0, err
	}
	if n > 32767 {
		return 0, argError(op, path, "replication", q["replication"], "must be <= 32767")
	}
	return uint16(n), nil
}

// destPath parses a path-valued parameter (destination, sources...).
func destPath(op, name, v string) (string, error) {
	if v == "" {
		return "", meta.Errorf(op, v, meta.ErrInvalidArgument, "missing parameter %q", name)
	}
	// Hadoop's client sends a path; some send a full URI.
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.Host != "" {
		v = u.Path
	}
	return meta.CleanPath(op, v)
}
