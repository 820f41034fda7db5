package webhdfs

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// ACL and extended-attribute operations (HDFS's NamenodeWebHdfsMethods and
// JsonUtil for the shapes), served by the file system's ACLs and XAttrs.

var (
	aclException = wire.Exception{Status: http.StatusForbidden, Name: "AclException", ClassName: "org.apache.hadoop.hdfs.protocol.AclException"}
	ioException  = wire.Exception{Status: http.StatusForbidden, Name: "IOException", ClassName: "java.io.IOException"}
)

// asException gives err, when it is of kind k, the wire form ex: HDFS's
// AclException for an ACL the engine found invalid, IOException for an
// attribute that exists or is missing. Other errors pass.
func asException(path string, err error, k meta.Kind, ex wire.Exception) error {
	if err == nil || meta.KindOf(err) != k {
		return err
	}
	return &wireError{ex: ex, msg: opMessageOf(path, err)}
}

func opMessageOf(path string, err error) string {
	var oe *meta.OpError
	if errors.As(err, &oe) {
		return opMessage(path, oe)
	}
	return err.Error()
}

// fsActionPattern is HDFS's FsActionParam domain: "rwx", "r-x", "---"...
var fsActionPattern = regexp.MustCompile(`^[r-][w-][x-]$`)

// checkAccess serves CHECKACCESS (HDFS's FileSystem.access): 200 with no
// body when the caller has fsaction on the path and search on its
// ancestors, else 403 AccessControlException; 404 FileNotFoundException for
// a missing path.
func (h *Handler) checkAccess(rq *request) error {
	ac, ok := h.fs.(meta.AccessChecker)
	if !ok {
		return unsupported(h, rq)
	}
	v := rq.q["fsaction"]
	if v == "" || v == "null" { // "null" is FsActionParam's DEFAULT: no value
		return requiredParam(rq, "fsaction")
	}
	if !fsActionPattern.MatchString(v) {
		return argError(rq.op.lower, rq.path, "fsaction", v, "does not belong to the domain [r-][w-][x-]")
	}
	var mode meta.Perm
	for i, c := range "rwx" {
		if rune(v[i]) == c {
			mode |= 4 >> i
		}
	}
	if err := ac.CheckAccess(rq.ctx(), rq.user, rq.path, mode); err != nil {
		return err
	}
	// HDFS answers Response.ok(): no body and no Content-Type.
	rq.w.Header().Set("Content-Length", "0")
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// aclSpec reads the aclspec parameter, with permissions or without (the
// entries REMOVEACLENTRIES names).
func aclSpec(rq *request, withPerm bool) ([]meta.AclEntry, error) {
	v := rq.q["aclspec"]
	es, err := meta.ParseAclSpec(v, withPerm)
	if err != nil {
		return nil, argError(rq.op.lower, rq.path, "aclspec", v, err.Error())
	}
	if len(es) == 0 {
		return nil, argError(rq.op.lower, rq.path, "aclspec", v, "no ACL entries")
	}
	return es, nil
}

// aclChange serves the ACL setters: the spec parsed (specPerm: with
// permissions, without, or none taken), run with the capability, 200 empty.
func (h *Handler) aclChange(rq *request, specPerm int, run func(a meta.ACLs, es []meta.AclEntry) error) error {
	a := h.fs
	var es []meta.AclEntry
	if specPerm != noSpec {
		var err error
		if es, err = aclSpec(rq, specPerm == withPerm); err != nil {
			return err
		}
	}
	if err := asException(rq.path, run(a, es), meta.KindInvalidArgument, aclException); err != nil {
		return err
	}
	return writeEmpty(rq.w)
}

const (
	noSpec = iota
	withPerm
	withoutPerm
)

func (h *Handler) modifyAclEntries(rq *request) error {
	return h.aclChange(rq, withPerm, func(a meta.ACLs, es []meta.AclEntry) error {
		return a.ModifyAclEntries(rq.ctx(), rq.user, rq.path, es)
	})
}

func (h *Handler) removeAclEntries(rq *request) error {
	return h.aclChange(rq, withoutPerm, func(a meta.ACLs, es []meta.AclEntry) error {
		return a.RemoveAclEntries(rq.ctx(), rq.user, rq.path, es)
	})
}

func (h *Handler) setAcl(rq *request) error {
	return h.aclChange(rq, withPerm, func(a meta.ACLs, es []meta.AclEntry) error {
		return a.SetAcl(rq.ctx(), rq.user, rq.path, es)
	})
}

func (h *Handler) removeDefaultAcl(rq *request) error {
	return h.aclChange(rq, noSpec, func(a meta.ACLs, _ []meta.AclEntry) error {
		return a.RemoveDefaultAcl(rq.ctx(), rq.user, rq.path)
	})
}

func (h *Handler) removeAcl(rq *request) error {
	return h.aclChange(rq, noSpec, func(a meta.ACLs, _ []meta.AclEntry) error {
		return a.RemoveAcl(rq.ctx(), rq.user, rq.path)
	})
}

// aclStatusJSON is JsonUtil's AclStatus map: a TreeMap, so keys in order.
type aclStatusJSON struct {
	AclStatus struct {
		Entries    []string `json:"entries"`
		Group      string   `json:"group"`
		Owner      string   `json:"owner"`
		Permission string   `json:"permission"`
		StickyBit  bool     `json:"stickyBit"`
	} `json:"AclStatus"`
}

func (h *Handler) getAclStatus(rq *request) error {
	a := h.fs
	st, err := a.GetAclStatus(rq.ctx(), rq.user, rq.path)
	if err != nil {
		return err
	}
	var j aclStatusJSON
	j.AclStatus.Entries = make([]string, len(st.Entries))
	for i, e := range st.Entries {
		j.AclStatus.Entries[i] = e.String()
	}
	j.AclStatus.Group, j.AclStatus.Owner = st.Group, st.Owner
	j.AclStatus.Permission = wire.PermString(st.Perm)
	j.AclStatus.StickyBit = st.StickyBit
	return writeJackson(rq.w, j)
}

// writeJackson sends v as Jackson writes it: like encoding/json, but
// without escaping <, > and & (attribute names and values may hold them).
func writeJackson(w http.ResponseWriter, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return meta.Errorf("webhdfs", "", meta.ErrInternal, "encoding response: %v", err)
	}
	return writeBody(w, http.StatusOK, b.Bytes())
}

// xattrNamePattern is HDFS's XAttrNameParam: a known namespace, a dot and a
// name.
var xattrNamePattern = regexp.MustCompile(`^(?i:user\.|trusted\.|system\.|security\.|raw\.).+$`)

func xattrName(rq *request, v string) (string, error) {
	if !xattrNamePattern.MatchString(v) {
		why := "An XAttr name must be prefixed with user/trusted/security/system/raw, followed by a '.'"
		if xattrNamePattern.MatchString(v + "x") {
			why = "XAttr name cannot be empty" // a namespace and nothing after it
		}
		// HDFS's XAttrHelper throws HadoopIllegalArgumentException, whose
		// class name the client shows.
		return "", &wireError{ex: hadoopIllegalArgument, msg: argError(rq.op.lower, rq.path, "xattr.name", v, why).Error()}
	}
	return v, nil
}

var hadoopIllegalArgument = wire.Exception{Status: http.StatusBadRequest, Name: "HadoopIllegalArgumentException", ClassName: "org.apache.hadoop.HadoopIllegalArgumentException"}

// xattrError gives a missing or existing attribute HDFS's IOException: a
// not-found from a path that exists is the attribute's. The limit on an
// inode's attributes is an IOException in HDFS too, whichever kind the
// file system reports it with.
func (h *Handler) xattrError(rq *request, err error) error {
	switch k := meta.KindOf(err); k {
	case meta.KindExists, meta.KindQuota:
		return asException(rq.path, err, k, ioException)
	case meta.KindNotFound:
		if _, serr := h.fs.Stat(rq.ctx(), rq.user, rq.path); serr == nil {
			return asException(rq.path, err, meta.KindNotFound, ioException)
		}
	}
	return err
}

func (h *Handler) setXAttr(rq *request) error {
	x := h.fs
	op, p := rq.op.lower, rq.path
	// HDFS checks that both parameters are given before anything else.
	if rq.q["xattr.name"] == "" {
		return requiredParam(rq, "xattr.name")
	}
	if rq.q["flag"] == "" {
		return requiredParam(rq, "flag")
	}
	name, err := xattrName(rq, rq.q["xattr.name"])
	if err != nil {
		return err
	}
	var value []byte
	if v, ok := rq.q["xattr.value"]; ok {
		if value, err = meta.DecodeXAttrValue(v); err != nil {
			return argError(op, p, "xattr.value", v, err.Error())
		}
	}
	var flag meta.XAttrSetFlag
	for _, f := range strings.Split(rq.q["flag"], ",") {
		switch strings.ToUpper(strings.TrimSpace(f)) {
		case "CREATE":
			flag |= meta.XAttrCreate
		case "REPLACE":
			flag |= meta.XAttrReplace
		case "":
		default:
			return argError(op, p, "flag", rq.q["flag"], "want CREATE, REPLACE or both")
		}
	}
	if flag == 0 {
		return argError(op, p, "flag", rq.q["flag"], "A flag must be specified.")
	}
	if err := x.SetXAttr(rq.ctx(), rq.user, p, meta.XAttr{Name: name, Value: value}, flag); err != nil {
		return h.xattrError(rq, err)
	}
	return writeEmpty(rq.w)
}

func (h *Handler) removeXAttr(rq *request) error {
	x := h.fs
	if rq.q["xattr.name"] == "" {
		return requiredParam(rq, "xattr.name")
	}
	name, err := xattrName(rq, rq.q["xattr.name"])
	if err != nil {
		return err
	}
	if err := x.RemoveXAttr(rq.ctx(), rq.user, rq.path, name); err != nil {
		return h.xattrError(rq, err)
	}
	return writeEmpty(rq.w)
}

type xattrJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// GETXATTRS takes every xattr.name given (the one parameter WebHDFS
// repeats), or none for all the caller may see.
func (h *Handler) getXAttrs(rq *request) error {
	x := h.fs
	enc := meta.XAttrText
	if v := rq.q["encoding"]; v != "" {
		var err error
		if enc, err = meta.ParseXAttrEncoding(v); err != nil {
			return argError(rq.op.lower, rq.path, "encoding", v, err.Error())
		}
	}
	var names []string
	all, _ := url.ParseQuery(rq.r.URL.RawQuery) // parseQuery accepted it
	for k, vs := range all {
		if strings.EqualFold(k, "xattr.name") {
			for _, v := range vs {
				n, err := xattrName(rq, v)
				if err != nil {
					return err
				}
				names = append(names, n)
			}
		}
	}
	xs, err := x.GetXAttrs(rq.ctx(), rq.user, rq.path, names)
	if err != nil {
		return h.xattrError(rq, err)
	}
	var j struct {
		XAttrs []xattrJSON `json:"XAttrs"`
	}
	j.XAttrs = make([]xattrJSON, len(xs))
	for i, a := range xs {
		j.XAttrs[i] = xattrJSON{Name: a.Name, Value: meta.EncodeXAttrValue(a.Value, enc)}
	}
	return writeJackson(rq.w, j)
}

// LISTXATTRS answers, as HDFS does, a JSON string holding a JSON array.
func (h *Handler) listXAttrs(rq *request) error {
	x := h.fs
	names, err := x.ListXAttrs(rq.ctx(), rq.user, rq.path)
	var oe *meta.OpError
	if meta.KindOf(err) == meta.KindNotFound && errors.As(err, &oe) {
		// HDFS's words here are FSDirectory.resolveLastINode's, not "File
		// does not exist".
		return &wireError{ex: wire.ExceptionOf(meta.KindNotFound), msg: "cannot find " + rq.path + " (" + opMessage(rq.path, oe) + ")"}
	}
	if err != nil {
		return err
	}
	if names == nil {
		names = []string{}
	}
	var inner bytes.Buffer
	enc := json.NewEncoder(&inner)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(names) // strings always encode
	return writeJackson(rq.w, map[string]string{"XAttrNames": strings.TrimSuffix(inner.String(), "\n")})
}
