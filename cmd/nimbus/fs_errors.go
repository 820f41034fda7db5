package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

// kindJSONNames are the stable names of error kinds in --json output.
var kindJSONNames = map[meta.Kind]string{
	meta.KindUnknown:         "unknown",
	meta.KindNotFound:        "not_found",
	meta.KindExists:          "already_exists",
	meta.KindNotDir:          "not_a_directory",
	meta.KindIsDir:           "is_a_directory",
	meta.KindNotEmpty:        "not_empty",
	meta.KindPermission:      "permission_denied",
	meta.KindInvalidPath:     "invalid_path",
	meta.KindQuota:           "quota_exceeded",
	meta.KindBusy:            "busy",
	meta.KindInvalidArgument: "invalid_argument",
	meta.KindLease:           "lease",
	meta.KindTooLarge:        "too_large",
	meta.KindUnresolvedLink:  "unresolved_link",
	meta.KindUnsupported:     "unsupported",
	meta.KindInternal:        "internal",
	meta.KindOutcomeUnknown:  "outcome_unknown",
	meta.KindWrongOwner:      "wrong_owner",
}

func kindJSONName(k meta.Kind) string {
	if n, ok := kindJSONNames[k]; ok {
		return n
	}
	return "unknown"
}

// cliError renders err as the operation op on path p failed: the command's
// own name and the user's path lead, whatever op name and path the library
// used; the library's path, when it differs, and its detail follow in
// parentheses. Local file errors get the kind of their cause.
func cliError(op, p string, err error) *meta.OpError {
	var oe *meta.OpError
	if errors.As(err, &oe) {
		var details []string
		// A copy's temporary file is named only when the error is about it
		// as such: another writer holds it.
		if oe.Path != "" && oe.Path != p && (!strings.HasSuffix(oe.Path, copyingSuffix) || meta.KindOf(oe.Err) == meta.KindLease) {
			details = append(details, "at "+oe.Path)
		}
		if oe.Detail != "" {
			details = append(details, oe.Detail)
		}
		return &meta.OpError{Op: op, Path: p, Err: oe.Err, Detail: strings.Join(details, ": ")}
	}
	if meta.KindOf(err) != meta.KindUnknown {
		return &meta.OpError{Op: op, Path: p, Err: err}
	}
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &meta.OpError{Op: op, Path: p, Err: meta.ErrNotFound, Detail: "local file"}
	case errors.Is(err, fs.ErrExist):
		return &meta.OpError{Op: op, Path: p, Err: meta.ErrExists, Detail: "local file"}
	case errors.Is(err, fs.ErrPermission):
		return &meta.OpError{Op: op, Path: p, Err: meta.ErrPermission, Detail: "local file"}
	case errors.As(err, &pe):
		return &meta.OpError{Op: op, Path: p, Err: pe.Err}
	}
	return &meta.OpError{Op: op, Path: p, Err: err}
}

// fail reports that op on p failed: it prints `nimbus fs: <op> <path>: <kind>`
// and marks the command failed (exit status 1, or 3 when the operation may
// or may not have happened: a script must look before it runs it again). It returns the rendered
// error so that JSON results can carry it.
func (sh *shell) fail(op, p string, err error) *meta.OpError {
	ce := cliError(op, p, err)
	fmt.Fprintf(sh.stderr, "nimbus fs: %s\n", ce.Error())
	sh.failed = true
	if meta.KindOf(ce.Err) == meta.KindOutcomeUnknown {
		sh.unknown = true
	}
	return ce
}

// jsonError is the error object of --json results.
type jsonError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// opResult is the --json result of one argument of a command that changes
// the namespace (mkdir, touch, put, get, mv, rm, chmod, chown).
type opResult struct {
	Op    string     `json:"op"`
	Path  string     `json:"path"`
	Dst   string     `json:"dst,omitempty"` // mv, put, get: where it went
	OK    bool       `json:"ok"`
	Error *jsonError `json:"error,omitempty"`
}

// results collects opResult values for --json output.
type results struct {
	items []opResult
}

func (r *results) ok(op, p, dst string) {
	r.items = append(r.items, opResult{Op: op, Path: p, Dst: dst, OK: true})
}

func (r *results) failed(op, p, dst string, ce *meta.OpError) {
	r.items = append(r.items, opResult{Op: op, Path: p, Dst: dst, Error: &jsonError{
		Kind:    kindJSONName(meta.KindOf(ce.Err)),
		Message: ce.Error(),
	}})
}

// report records the outcome of op on p (printing the error, if any) and
// tells whether it succeeded.
func (sh *shell) report(r *results, op, p, dst string, err error) bool {
	if err != nil {
		ce := sh.fail(op, p, err)
		r.failed(op, p, dst, ce)
		return false
	}
	r.ok(op, p, dst)
	return true
}

// finish writes the JSON results when --json is on and returns the exit
// status.
func (sh *shell) finish(r *results) int {
	if sh.json {
		if r.items == nil {
			r.items = []opResult{}
		}
		sh.writeJSON(r.items)
	}
	if sh.failed {
		return 1
	}
	return 0
}
