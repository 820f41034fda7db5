package webhdfs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// wireError is an error that HDFS reports with an exception no meta.Kind
// stands for (EOFException when seeking past the end of a file). It is used
// sparingly, for what the gateway itself detects.
type wireError struct {
	ex  wire.Exception
	msg string
}

func (e *wireError) Error() string { return e.msg }

// exceptionFor returns the wire form of err (wire.Exceptions is the table).
func exceptionFor(err error) wire.Exception {
	var we *wireError
	switch {
	case errors.As(err, &we):
		return we.ex
	case meta.KindOf(err) == meta.KindOutcomeUnknown:
		// Before the deadline: a commit cut off by it may have happened.
		return wire.ExceptionOf(meta.KindOutcomeUnknown)
	case errors.Is(err, context.DeadlineExceeded):
		return wire.ExceptionOf(meta.KindBusy)
	}
	return wire.ExceptionOf(meta.KindOf(err))
}

// errorMessage phrases err as HDFS would where clients look at the text
// (Python's hdfs package and fsspec show it; some match "File does not
// exist"), keeping Nimbus's own description after it. path is the path the
// request named ("" if unknown); see opMessage.
func errorMessage(path string, err error) string {
	var oe *meta.OpError
	if errors.As(err, &oe) {
		msg := opMessage(path, oe)
		switch meta.KindOf(err) {
		case meta.KindNotFound:
			return "File does not exist: " + oe.Path + " (" + msg + ")"
		case meta.KindIsDir:
			return "Path is not a file: " + oe.Path + " (" + msg + ")"
		case meta.KindExists:
			return oe.Path + " already exists (" + msg + ")"
		case meta.KindPermission:
			return "Permission denied: " + msg
		}
		return msg
	}
	return err.Error()
}

// opMessage renders oe as the CLI does (cmd/nimbus/fs_errors.go): the
// operation on the path the request named leads, and the path the engine
// names, when another (the ancestor that denied access, the staging file of
// an upload), follows with the detail: "mkdirs /x: permission denied (at /:
// user alice needs WRITE ...)", not "mkdirs /: ...".
func opMessage(path string, oe *meta.OpError) string {
	if path == "" || oe.Path == path {
		return oe.Error()
	}
	detail := "at " + oe.Path
	if oe.Detail != "" {
		detail += ": " + oe.Detail
	}
	return (&meta.OpError{Op: oe.Op, Path: path, Err: oe.Err, Detail: detail}).Error()
}

// writeError sends err, an error of the request for path, as a
// RemoteException with the table's status.
func writeError(w http.ResponseWriter, path string, err error) int {
	ex := exceptionFor(err)
	var body wire.RemoteException
	body.RemoteException.Exception = ex.Name
	body.RemoteException.JavaClassName = ex.ClassName
	body.RemoteException.Message = errorMessage(path, err)
	b, _ := json.Marshal(body) // a struct of strings always marshals
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Del("Location")
	w.WriteHeader(ex.Status)
	_, _ = w.Write(b)
	return ex.Status
}

// argError is a bad request parameter, phrased as Hadoop's parameter parser
// phrases it.
func argError(op, path, param, value, why string) error {
	return meta.Errorf(op, path, meta.ErrInvalidArgument,
		"Invalid value for webhdfs parameter %q: %q: %s", param, value, why)
}
