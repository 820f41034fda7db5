package wire

import (
	"net/http"

	"github.com/nimbus-fs/nimbus/meta"
)

// Exception is how an error kind appears on the wire: the HTTP status and the
// Java exception that Hadoop's client re-creates from the RemoteException.
type Exception struct {
	Status    int
	Name      string // RemoteException.exception: the simple class name
	ClassName string // RemoteException.javaClassName
}

// Exceptions is the one table from meta.Kind to WebHDFS exceptions, indexed
// by kind; read it, never write it. The statuses are those of HDFS's
// ExceptionHandler (FileNotFoundException 404, other IOExceptions 403,
// IllegalArgument- and UnsupportedOperationException 400, anything else 500),
// except KindBusy: HDFS sends RetriableException as 403, Nimbus as 503 so that
// generic HTTP clients retry too; Hadoop's client retries on the class name
// whatever the status. Busy means "not done, nothing changed": safe to send
// again. KindOutcomeUnknown ("it may or may not have happened") is the
// opposite: a plain IOException, 403 as HDFS sends one, which neither
// Hadoop's client (its retry policies retry a RemoteException only when it
// wraps RetriableException, StandbyException or, with the retry policy on,
// SafeModeException) nor a generic HTTP client (which retries 5xx and 429)
// sends again by itself.
var Exceptions = [...]Exception{
	meta.KindUnknown:  {http.StatusInternalServerError, "RuntimeException", "java.lang.RuntimeException"},
	meta.KindNotFound: {http.StatusNotFound, "FileNotFoundException", "java.io.FileNotFoundException"},
	meta.KindExists:   {http.StatusForbidden, "FileAlreadyExistsException", "org.apache.hadoop.fs.FileAlreadyExistsException"},
	meta.KindNotDir:   {http.StatusForbidden, "ParentNotDirectoryException", "org.apache.hadoop.fs.ParentNotDirectoryException"},
	// HDFS answers "Path is not a file" with FileNotFoundException when a
	// file operation (open, append, checksum, truncate) meets a directory.
	meta.KindIsDir:       {http.StatusNotFound, "FileNotFoundException", "java.io.FileNotFoundException"},
	meta.KindNotEmpty:    {http.StatusForbidden, "PathIsNotEmptyDirectoryException", "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException"},
	meta.KindPermission:  {http.StatusForbidden, "AccessControlException", "org.apache.hadoop.security.AccessControlException"},
	meta.KindInvalidPath: {http.StatusBadRequest, "InvalidPathException", "org.apache.hadoop.fs.InvalidPathException"},
	// meta has one quota kind for both quotas; QuotaExceededException is the
	// common superclass of HDFS's NSQuotaExceededException and
	// DSQuotaExceededException, so catch clauses for either base class work.
	meta.KindQuota:           {http.StatusForbidden, "QuotaExceededException", "org.apache.hadoop.hdfs.protocol.QuotaExceededException"},
	meta.KindBusy:            {http.StatusServiceUnavailable, "RetriableException", "org.apache.hadoop.ipc.RetriableException"},
	meta.KindInvalidArgument: {http.StatusBadRequest, "IllegalArgumentException", "java.lang.IllegalArgumentException"},
	meta.KindLease:           {http.StatusForbidden, "AlreadyBeingCreatedException", "org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException"},
	meta.KindTooLarge:        {http.StatusForbidden, "IOException", "java.io.IOException"},
	meta.KindUnresolvedLink:  {http.StatusForbidden, "UnresolvedLinkException", "org.apache.hadoop.fs.UnresolvedLinkException"},
	// Not UnsupportedOperationException, which HDFS sends for an op it
	// knows but does not serve: Hadoop 3.4's client (JsonUtilClient.
	// toRemoteException) rethrows that class itself, a RuntimeException
	// that `hadoop fs` reports as "Fatal internal error" with a stack trace.
	// HDFS answers an op it does not know with IllegalArgumentException
	// ("Invalid value for webhdfs parameter "op""), which reaches
	// the caller as an IOException (RemoteException): so does Nimbus.
	meta.KindUnsupported: {http.StatusBadRequest, "IllegalArgumentException", "java.lang.IllegalArgumentException"},
	meta.KindInternal:    {http.StatusInternalServerError, "RuntimeException", "java.lang.RuntimeException"},
	// The message says that the outcome is unknown and that the caller
	// should look before trying again.
	meta.KindOutcomeUnknown: {http.StatusForbidden, "IOException", "java.io.IOException"},
	// WebHDFS requests are never routed (no request flag), so a gateway
	// never answers this; should a wrong-owner error reach it from
	// elsewhere it means "not done, nothing changed", as KindBusy: 503
	// RetriableException, which Hadoop's client and generic HTTP clients
	// retry. Not 307: a redirect needs the owner's HTTP address, which the
	// routing map has only for the RPC protocol, and a WebHDFS server serves
	// any path anyway.
	meta.KindWrongOwner: {http.StatusServiceUnavailable, "RetriableException", "org.apache.hadoop.ipc.RetriableException"},
}

// ExceptionOf returns the wire form of kind k (KindUnknown's for a kind the
// table does not know).
func ExceptionOf(k meta.Kind) Exception {
	if int(k) >= len(Exceptions) {
		k = meta.KindUnknown
	}
	return Exceptions[k]
}

// exceptionKinds is the other direction: the simple class name of a
// RemoteException to the sentinel of its kind, for HDFS's own exceptions and
// those Nimbus's gateway sends. The generic classes (IOException,
// RuntimeException) are absent on purpose: they name no kind.
var exceptionKinds = map[string]error{
	"FileNotFoundException":            meta.ErrNotFound,
	"FileAlreadyExistsException":       meta.ErrExists,
	"ParentNotDirectoryException":      meta.ErrNotDir,
	"PathIsNotDirectoryException":      meta.ErrNotDir,
	"PathIsDirectoryException":         meta.ErrIsDir,
	"PathIsNotEmptyDirectoryException": meta.ErrNotEmpty,
	"AccessControlException":           meta.ErrPermission,
	"SecurityException":                meta.ErrPermission,
	"InvalidPathException":             meta.ErrInvalidPath,
	"QuotaExceededException":           meta.ErrQuota,
	"NSQuotaExceededException":         meta.ErrQuota,
	"DSQuotaExceededException":         meta.ErrQuota,
	"RetriableException":               meta.ErrBusy,
	"StandbyException":                 meta.ErrBusy,
	"SafeModeException":                meta.ErrBusy,
	"IllegalArgumentException":         meta.ErrInvalidArgument,
	"NumberFormatException":            meta.ErrInvalidArgument,
	"AlreadyBeingCreatedException":     meta.ErrLease,
	"LeaseExpiredException":            meta.ErrLease,
	"RecoveryInProgressException":      meta.ErrLease,
	"UnresolvedLinkException":          meta.ErrUnresolvedLink,
	"UnresolvedPathException":          meta.ErrUnresolvedLink,
	"UnsupportedOperationException":    meta.ErrUnsupported,
	"AclException":                     meta.ErrInvalidArgument, // an ACL the server found invalid
}

// SentinelOf returns the sentinel error of the kind a RemoteException's
// simple class name stands for, and false for a class that names no kind.
func SentinelOf(exception string) (error, bool) {
	s, ok := exceptionKinds[exception]
	return s, ok
}
