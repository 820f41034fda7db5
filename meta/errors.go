package meta

import (
	"errors"
	"fmt"
)

// Kind is the stable class of an error. It is what crosses every edge of the
// system: the RPC status, the CLI exit message and the WebHDFS exception class
// are all derived from it through one table each, never from message text.
type Kind uint8

// The error kinds. Their numeric values are part of the wire format (api/nimbus.proto
// mirrors them); append new kinds, never renumber.
const (
	KindUnknown         Kind = 0
	KindNotFound        Kind = 1
	KindExists          Kind = 2
	KindNotDir          Kind = 3
	KindIsDir           Kind = 4
	KindNotEmpty        Kind = 5
	KindPermission      Kind = 6
	KindInvalidPath     Kind = 7
	KindQuota           Kind = 8
	KindBusy            Kind = 9  // not done, nothing changed: the caller may send it again
	KindInvalidArgument Kind = 10 // a parameter other than the path is wrong
	KindLease           Kind = 11 // the file is being written by another client
	KindTooLarge        Kind = 12 // the file would exceed a size limit
	KindUnresolvedLink  Kind = 13 // a path component is a symbolic link
	KindUnsupported     Kind = 14
	KindInternal        Kind = 15 // a bug or a corrupt store: never the caller's fault
	// KindOutcomeUnknown: the operation may or may not have happened (its
	// commit was sent and the answer lost, and nobody could check which).
	// Unlike KindBusy, not safe to send again blindly: only with the same
	// request id (which the server answers from its record of the first), or
	// after looking.
	KindOutcomeUnknown Kind = 16
	// KindWrongOwner: not done, nothing changed; another deployment owns
	// the request (a routed request that reached the wrong server). The
	// routing client sends it to the owner; it reaches a caller only when
	// that keeps failing.
	KindWrongOwner Kind = 17
)

var kindNames = [...]string{
	KindUnknown:         "unknown error",
	KindNotFound:        "not found",
	KindExists:          "already exists",
	KindNotDir:          "not a directory",
	KindIsDir:           "is a directory",
	KindNotEmpty:        "directory not empty",
	KindPermission:      "permission denied",
	KindInvalidPath:     "invalid path",
	KindQuota:           "quota exceeded",
	KindBusy:            "busy, retry",
	KindInvalidArgument: "invalid argument",
	KindLease:           "file is being written by another client",
	KindTooLarge:        "file too large",
	KindUnresolvedLink:  "path goes through a symbolic link",
	KindUnsupported:     "operation not supported",
	KindInternal:        "internal error",
	KindOutcomeUnknown:  "outcome unknown",
	KindWrongOwner:      "wrong owner, send it to the owner deployment",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("error kind %d", uint8(k))
}

// Sentinel errors, one per kind. Test with errors.Is; every error returned by a
// FileSystem wraps exactly one of them.
var (
	ErrNotFound        = &kindError{KindNotFound}
	ErrExists          = &kindError{KindExists}
	ErrNotDir          = &kindError{KindNotDir}
	ErrIsDir           = &kindError{KindIsDir}
	ErrNotEmpty        = &kindError{KindNotEmpty}
	ErrPermission      = &kindError{KindPermission}
	ErrInvalidPath     = &kindError{KindInvalidPath}
	ErrQuota           = &kindError{KindQuota}
	ErrBusy            = &kindError{KindBusy}
	ErrInvalidArgument = &kindError{KindInvalidArgument}
	ErrLease           = &kindError{KindLease}
	ErrTooLarge        = &kindError{KindTooLarge}
	ErrUnresolvedLink  = &kindError{KindUnresolvedLink}
	ErrUnsupported     = &kindError{KindUnsupported}
	ErrInternal        = &kindError{KindInternal}
	ErrOutcomeUnknown  = &kindError{KindOutcomeUnknown}
	ErrWrongOwner      = &kindError{KindWrongOwner}
)

var sentinels = [...]error{
	KindUnknown:         nil,
	KindNotFound:        ErrNotFound,
	KindExists:          ErrExists,
	KindNotDir:          ErrNotDir,
	KindIsDir:           ErrIsDir,
	KindNotEmpty:        ErrNotEmpty,
	KindPermission:      ErrPermission,
	KindInvalidPath:     ErrInvalidPath,
	KindQuota:           ErrQuota,
	KindBusy:            ErrBusy,
	KindInvalidArgument: ErrInvalidArgument,
	KindLease:           ErrLease,
	KindTooLarge:        ErrTooLarge,
	KindUnresolvedLink:  ErrUnresolvedLink,
	KindUnsupported:     ErrUnsupported,
	KindInternal:        ErrInternal,
	KindOutcomeUnknown:  ErrOutcomeUnknown,
	KindWrongOwner:      ErrWrongOwner,
}

type kindError struct{ kind Kind }

func (e *kindError) Error() string { return "nimbus: " + e.kind.String() }

// Sentinel returns the sentinel error of kind k (nil for KindUnknown).
func Sentinel(k Kind) error {
	if int(k) < len(sentinels) {
		return sentinels[k]
	}
	return nil
}

// KindOf returns the kind of err: the kind of the sentinel it wraps, or
// KindUnknown when it wraps none (a context error, an I/O error...).
func KindOf(err error) Kind {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return KindUnknown
}

// OpError is the error every FileSystem operation returns: it names the
// operation and the path, and wraps the sentinel of its kind, possibly with a
// detail message.
type OpError struct {
	Op     string // e.g. "create", "rename"
	Path   string // the path the operation failed on (for rename, the one at fault)
	Err    error  // wraps a sentinel error
	Detail string // optional human explanation, e.g. "limit is 131072 bytes"
}

func (e *OpError) Error() string {
	msg := e.Op + " " + e.Path + ": " + kindText(e.Err)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

func (e *OpError) Unwrap() error { return e.Err }

func kindText(err error) string {
	if k := KindOf(err); k != KindUnknown {
		return k.String()
	}
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Errorf builds an *OpError of the given sentinel with a formatted detail.
func Errorf(op, path string, sentinel error, format string, args ...any) *OpError {
	d := ""
	if format != "" {
		d = fmt.Sprintf(format, args...)
	}
	return &OpError{Op: op, Path: path, Err: sentinel, Detail: d}
}

// WrapOp makes err an *OpError for op and path unless it already is one.
func WrapOp(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Path: path, Err: err}
}
