//go:build !unix

package webhdfs

import "errors"

func statfs(dir string) (capacity, remaining int64, err error) {
	return 0, 0, errors.New("statfs is not supported on this platform")
}
