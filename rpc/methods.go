package rpc

import "github.com/nimbus-fs/nimbus/api"

// Method identifies one RPC method; it names metrics and errors.
type Method uint8

// The methods, one per request body of the envelope.
const (
	MethodUnknown Method = iota
	MethodMkdirs
	MethodCreate
	MethodAppend
	MethodWrite
	MethodComplete
	MethodRead
	MethodStat
	MethodList
	MethodDelete
	MethodRename
	MethodSetPermission
	MethodSetOwner
	MethodSetTimes
	MethodSetReplication
	MethodTruncate
	MethodConcat
	MethodContentSummary
	MethodSetQuota
	MethodCreateSymlink
	MethodRenewLease
	MethodDefaults
	MethodEcho
	MethodFsck
	MethodAcl                    // the meta.ACLs capability
	MethodXAttr                  // the meta.XAttrs capability
	MethodSetPermissionRecursive // the meta.RecursiveAttrs capability
	MethodSetOwnerRecursive
	// The data path of the DataNode mode (DataPath).
	MethodAddBlock
	MethodCompleteBlock
	MethodGetBlockLocations
	MethodUpdateBlockForPipeline
	MethodUpdatePipeline
	MethodAbandonBlock
	MethodFsync
	MethodAdditionalDataNode
	MethodAppendBlock
	numMethods
)

var methodNames = [numMethods]string{
	MethodUnknown: "unknown", MethodMkdirs: "mkdirs", MethodCreate: "create", MethodAppend: "append",
	MethodWrite: "write", MethodComplete: "complete", MethodRead: "read", MethodStat: "stat",
	MethodList: "list", MethodDelete: "delete", MethodRename: "rename",
	MethodSetPermission: "setPermission", MethodSetOwner: "setOwner", MethodSetTimes: "setTimes",
	MethodSetReplication: "setReplication", MethodTruncate: "truncate", MethodConcat: "concat",
	MethodContentSummary: "contentSummary", MethodSetQuota: "setQuota", MethodCreateSymlink: "createSymlink",
	MethodRenewLease: "renewLease", MethodDefaults: "defaults", MethodEcho: "echo", MethodFsck: "fsck",
	MethodAcl: "acl", MethodXAttr: "xattr",
	MethodSetPermissionRecursive: "setPermissionRecursive", MethodSetOwnerRecursive: "setOwnerRecursive",
	MethodAddBlock: "addBlock", MethodCompleteBlock: "completeBlock", MethodGetBlockLocations: "getBlockLocations",
	MethodUpdateBlockForPipeline: "updateBlockForPipeline", MethodUpdatePipeline: "updatePipeline",
	MethodAbandonBlock: "abandonBlock", MethodFsync: "fsync", MethodAdditionalDataNode: "additionalDataNode",
	MethodAppendBlock: "appendBlock",
}

// String returns the method's name as used in errors and metric labels.
func (m Method) String() string {
	if m < numMethods {
		return methodNames[m]
	}
	return "unknown"
}

// ReadOnly reports whether the method changes nothing: running it twice is
// running it once. A write is resubmitted after a lost connection only with
// its request id unchanged, for the server to answer from its record
// (dispatch).
func (m Method) ReadOnly() bool {
	switch m {
	case MethodRead, MethodStat, MethodList, MethodContentSummary, MethodDefaults, MethodEcho, MethodFsck,
		MethodGetBlockLocations:
		return true
	}
	return false
}

// MethodOf returns the method of a request and the path it is about (the
// first path argument; "" for methods without one).
func MethodOf(req *api.Request) (Method, string) {
	switch b := req.GetBody().(type) {
	case *api.Request_Mkdirs:
		return MethodMkdirs, b.Mkdirs.GetPath()
	case *api.Request_Create:
		return MethodCreate, b.Create.GetPath()
	case *api.Request_Append:
		return MethodAppend, b.Append.GetPath()
	case *api.Request_Write:
		return MethodWrite, b.Write.GetPath()
	case *api.Request_Complete:
		return MethodComplete, b.Complete.GetPath()
	case *api.Request_Read:
		return MethodRead, b.Read.GetPath()
	case *api.Request_Stat:
		return MethodStat, b.Stat.GetPath()
	case *api.Request_List:
		return MethodList, b.List.GetPath()
	case *api.Request_Delete:
		return MethodDelete, b.Delete.GetPath()
	case *api.Request_Rename:
		return MethodRename, b.Rename.GetSrc()
	case *api.Request_SetPermission:
		return MethodSetPermission, b.SetPermission.GetPath()
	case *api.Request_SetOwner:
		return MethodSetOwner, b.SetOwner.GetPath()
	case *api.Request_SetTimes:
		return MethodSetTimes, b.SetTimes.GetPath()
	case *api.Request_SetReplication:
		return MethodSetReplication, b.SetReplication.GetPath()
	case *api.Request_Truncate:
		return MethodTruncate, b.Truncate.GetPath()
	case *api.Request_Concat:
		return MethodConcat, b.Concat.GetTarget()
	case *api.Request_ContentSummary:
		return MethodContentSummary, b.ContentSummary.GetPath()
	case *api.Request_SetQuota:
		return MethodSetQuota, b.SetQuota.GetPath()
	case *api.Request_CreateSymlink:
		return MethodCreateSymlink, b.CreateSymlink.GetLink()
	case *api.Request_RenewLease:
		return MethodRenewLease, ""
	case *api.Request_Defaults:
		return MethodDefaults, ""
	case *api.Request_Echo:
		return MethodEcho, ""
	case *api.Request_Fsck:
		return MethodFsck, ""
	case *api.Request_Acl:
		return MethodAcl, b.Acl.GetPath()
	case *api.Request_Xattr:
		return MethodXAttr, b.Xattr.GetPath()
	case *api.Request_SetPermissionRecursive:
		return MethodSetPermissionRecursive, b.SetPermissionRecursive.GetPath()
	case *api.Request_SetOwnerRecursive:
		return MethodSetOwnerRecursive, b.SetOwnerRecursive.GetPath()
	case *api.Request_AddBlock:
		return MethodAddBlock, b.AddBlock.GetPath()
	case *api.Request_CompleteBlock:
		return MethodCompleteBlock, b.CompleteBlock.GetPath()
	case *api.Request_GetBlockLocations:
		return MethodGetBlockLocations, b.GetBlockLocations.GetPath()
	case *api.Request_UpdateBlockForPipeline:
		return MethodUpdateBlockForPipeline, b.UpdateBlockForPipeline.GetPath()
	case *api.Request_UpdatePipeline:
		return MethodUpdatePipeline, b.UpdatePipeline.GetPath()
	case *api.Request_AbandonBlock:
		return MethodAbandonBlock, b.AbandonBlock.GetPath()
	case *api.Request_Fsync:
		return MethodFsync, b.Fsync.GetPath()
	case *api.Request_AdditionalDataNode:
		return MethodAdditionalDataNode, b.AdditionalDataNode.GetPath()
	case *api.Request_AppendBlock:
		return MethodAppendBlock, b.AppendBlock.GetPath()
	}
	return MethodUnknown, ""
}
