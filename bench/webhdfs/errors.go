package webhdfs

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// statusKinds is the fallback when the body is not a RemoteException.
var statusKinds = map[int]error{
	http.StatusNotFound:           meta.ErrNotFound,
	http.StatusForbidden:          meta.ErrPermission,
	http.StatusUnauthorized:       meta.ErrPermission,
	http.StatusBadRequest:         meta.ErrInvalidArgument,
	http.StatusConflict:           meta.ErrExists,
	http.StatusServiceUnavailable: meta.ErrBusy,
	http.StatusTooManyRequests:    meta.ErrBusy,
}

// decodeError turns an error response into an *meta.OpError of the kind the
// exception names; the server's message is kept as the detail.
func decodeError(op, path string, status int, body []byte) error {
	body = body[:min(len(body), 64<<10)]
	var re wire.RemoteException
	if json.Unmarshal(body, &re) == nil && re.RemoteException.Exception != "" {
		ex := re.RemoteException
		sentinel, ok := wire.SentinelOf(ex.Exception)
		if !ok {
			// A generic class (IOException, RuntimeException) names no
			// kind, and its status none either where HDFS answers 403 for
			// every IOException: the error then has no kind.
			if s, found := statusKinds[status]; found && status != http.StatusForbidden {
				sentinel = s
			} else {
				sentinel = fmt.Errorf("webhdfs: %s", ex.Exception)
			}
		}
		return &meta.OpError{Op: op, Path: path, Err: sentinel, Detail: ex.Exception + ": " + ex.Message}
	}
	sentinel, ok := statusKinds[status]
	if !ok {
		sentinel = meta.ErrInternal
	}
	detail := fmt.Sprintf("%d %s", status, http.StatusText(status))
	if len(body) > 0 {
		detail += ": " + string(body[:min(len(body), 200)])
	}
	return &meta.OpError{Op: op, Path: path, Err: sentinel, Detail: detail}
}

// opErr wraps a transport error (no kind: the request may not have arrived).
func opErr(op, path string, err error) error {
	if _, ok := err.(*meta.OpError); ok {
		return err
	}
	return &meta.OpError{Op: op, Path: path, Err: fmt.Errorf("webhdfs: %w", err)}
}
