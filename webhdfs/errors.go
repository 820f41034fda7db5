package webhdfs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/nimbus-fs/nimbus/meta"
)

// exception is how one error kind appears on the wire: the HTTP status and the
// Java exception that Hadoop's client re-creates from the RemoteException JSON.
type exception struct {
	status    int
	name      string // RemoteException.exception: the simple class name
	className string // RemoteException.javaClassName
}

// kindExceptions is the one table from meta.Kind to WebHDFS exceptions. The
// statuses are those of HDFS's ExceptionHandler (FileNotFoundException 404,
// other IOExceptions 403, IllegalArgument- and UnsupportedOperationException
// 400, anything else 500), except KindBusy: HDFS sends RetriableException as
// 403, Nimbus as 503 so that generic HTTP clients retry too; Hadoop's client
// retries on the class name whatever the status.
var kindExceptions = [...]exception{
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
	meta.KindUnsupported:     {http.StatusBadRequest, "UnsupportedOperationException", "java.lang.UnsupportedOperationException"},
	meta.KindInternal:        {http.StatusInternalServerError, "RuntimeException", "java.lang.RuntimeException"},
}

// wireError is an error that HDFS reports with an exception no meta.Kind
// stands for (EOFException when seeking past the end of a file). It is used
// sparingly, for what the gateway itself detects.
type wireError struct {
	ex  exception
	msg string
}

func (e *wireError) Error() string { return e.msg }

// exceptionFor returns the wire form of err.
func exceptionFor(err error) exception {
	var we *wireError
	switch {
	case errors.As(err, &we):
		return we.ex
	case errors.Is(err, context.DeadlineExceeded):
		return kindExceptions[meta.KindBusy]
	}
	k := meta.KindOf(err)
	if int(k) >= len(kindExceptions) {
		k = meta.KindUnknown
	}
	return kindExceptions[k]
}

// remoteException is the body of every error response.
type remoteException struct {
	RemoteException struct {
		Exception     string `json:"exception"`
		JavaClassName string `json:"javaClassName"`
		Message       string `json:"message"`
	} `json:"RemoteException"`
}

// errorMessage phrases err as HDFS would where clients look at the text
// (Python's hdfs package and fsspec show it; some match "File does not
// exist"), keeping Nimbus's own description after it.
func errorMessage(err error) string {
	var oe *meta.OpError
	if errors.As(err, &oe) {
		switch meta.KindOf(err) {
		case meta.KindNotFound:
			return "File does not exist: " + oe.Path + " (" + oe.Error() + ")"
		case meta.KindIsDir:
			return "Path is not a file: " + oe.Path + " (" + oe.Error() + ")"
		case meta.KindExists:
			return oe.Path + " already exists (" + oe.Error() + ")"
		case meta.KindPermission:
			return "Permission denied: " + oe.Error()
		}
	}
	return err.Error()
}

// writeError sends err as a RemoteException with the table's status.
func writeError(w http.ResponseWriter, err error) int {
	ex := exceptionFor(err)
	var body remoteException
	body.RemoteException.Exception = ex.name
	body.RemoteException.JavaClassName = ex.className
	body.RemoteException.Message = errorMessage(err)
	b, _ := json.Marshal(body) // a struct of strings always marshals
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Del("Location")
	w.WriteHeader(ex.status)
	_, _ = w.Write(b)
	return ex.status
}

// argError is a bad request parameter, phrased as Hadoop's parameter parser
// phrases it.
func argError(op, path, param, value, why string) error {
	return meta.Errorf(op, path, meta.ErrInvalidArgument,
		"Invalid value for webhdfs parameter %q: %q: %s", param, value, why)
}
