package webhdfs

import (
	"net/http"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

// opSpec is one WebHDFS operation: its HTTP method and its implementation.
type opSpec struct {
	name   string // as on the wire, e.g. "GETFILESTATUS"
	lower  string // for error messages: "getfilestatus"
	method string
	run    func(h *Handler, rq *request) error
}

// unsupported answers operations of the WebHDFS specification that Nimbus does
// not implement (snapshots, storage and erasure-coding policies, delegation
// tokens), and ACL, xattr and CHECKACCESS ops over a file system without
// the capability, as HDFS answers an op it does not know: 400
// IllegalArgumentException (the wire table's entry for KindUnsupported),
// which Hadoop's client raises as an IOException.
func unsupported(h *Handler, rq *request) error {
	return meta.Errorf(rq.op.lower, rq.path, meta.ErrUnsupported,
		"Invalid value for webhdfs parameter \"op\": %s is not supported by this server", rq.op.name)
}

// ops is the operation table, keyed by upper-case name.
var ops = buildOps(map[string]map[string]func(*Handler, *request) error{
	http.MethodGet: {
		"OPEN":                  (*Handler).open,
		"GETFILESTATUS":         (*Handler).getFileStatus,
		"GETFILELINKSTATUS":     (*Handler).getFileLinkStatus,
		"LISTSTATUS":            (*Handler).listStatus,
		"LISTSTATUS_BATCH":      (*Handler).listStatusBatch,
		"GETCONTENTSUMMARY":     (*Handler).getContentSummary,
		"GETQUOTAUSAGE":         (*Handler).getQuotaUsage,
		"GETFILECHECKSUM":       (*Handler).getFileChecksum,
		"GETHOMEDIRECTORY":      (*Handler).getHomeDirectory,
		"GETTRASHROOT":          (*Handler).getTrashRoot,
		"GETFILEBLOCKLOCATIONS": (*Handler).getFileBlockLocations,
		"GET_BLOCK_LOCATIONS":   (*Handler).getBlockLocations,
		"GETSERVERDEFAULTS":     (*Handler).getServerDefaults,
		"GETSTATUS":             (*Handler).getStatus,
		"GETLINKTARGET":         (*Handler).getLinkTarget,

		"GETDELEGATIONTOKEN":            unsupported,
		"GETACLSTATUS":                  (*Handler).getAclStatus,
		"GETXATTRS":                     (*Handler).getXAttrs,
		"LISTXATTRS":                    (*Handler).listXAttrs,
		"CHECKACCESS":                   (*Handler).checkAccess,
		"GETALLSTORAGEPOLICY":           unsupported,
		"GETSTORAGEPOLICY":              unsupported,
		"GETSNAPSHOTDIFF":               unsupported,
		"GETSNAPSHOTDIFFLISTING":        unsupported,
		"GETSNAPSHOTTABLEDIRECTORYLIST": unsupported,
		"GETSNAPSHOTLIST":               unsupported,
		"GETECPOLICY":                   unsupported,
		"GETECPOLICIES":                 unsupported,
		"GETECCODECS":                   unsupported,
		"GETSTORAGEPOLICYSATISFIER":     unsupported,
	},
	http.MethodPut: {
		"CREATE":         (*Handler).create,
		"MKDIRS":         (*Handler).mkdirs,
		"CREATESYMLINK":  (*Handler).createSymlink,
		"RENAME":         (*Handler).rename,
		"SETREPLICATION": (*Handler).setReplication,
		"SETOWNER":       (*Handler).setOwner,
		"SETPERMISSION":  (*Handler).setPermission,
		"SETTIMES":       (*Handler).setTimes,
		"SETQUOTA":       (*Handler).setQuota,

		"RENEWDELEGATIONTOKEN":  unsupported,
		"CANCELDELEGATIONTOKEN": unsupported,
		"MODIFYACLENTRIES":      (*Handler).modifyAclEntries,
		"REMOVEACLENTRIES":      (*Handler).removeAclEntries,
		"REMOVEDEFAULTACL":      (*Handler).removeDefaultAcl,
		"REMOVEACL":             (*Handler).removeAcl,
		"SETACL":                (*Handler).setAcl,
		"SETXATTR":              (*Handler).setXAttr,
		"REMOVEXATTR":           (*Handler).removeXAttr,
		"ALLOWSNAPSHOT":         unsupported,
		"DISALLOWSNAPSHOT":      unsupported,
		"CREATESNAPSHOT":        unsupported,
		"RENAMESNAPSHOT":        unsupported,
		"SETSTORAGEPOLICY":      unsupported,
		"SATISFYSTORAGEPOLICY":  unsupported,
		"ENABLEECPOLICY":        unsupported,
		"DISABLEECPOLICY":       unsupported,
		"SETECPOLICY":           unsupported,
		"SETQUOTABYSTORAGETYPE": unsupported,
	},
	http.MethodPost: {
		"APPEND":   (*Handler).appendOp,
		"CONCAT":   (*Handler).concat,
		"TRUNCATE": (*Handler).truncate,

		"UNSETSTORAGEPOLICY": unsupported,
		"UNSETECPOLICY":      unsupported,
	},
	http.MethodDelete: {
		"DELETE":         (*Handler).deleteOp,
		"DELETESNAPSHOT": unsupported,
	},
})

func buildOps(byMethod map[string]map[string]func(*Handler, *request) error) map[string]*opSpec {
	out := map[string]*opSpec{}
	for method, m := range byMethod {
		for name, run := range m {
			out[name] = &opSpec{name: name, lower: strings.ToLower(name), method: method, run: run}
		}
	}
	return out
}
