//go:build unix

package webhdfs

import "syscall"

// statfs returns the size and the space available to unprivileged users of
// the file system holding dir.
func statfs(dir string) (capacity, remaining int64, err error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(dir, &s); err != nil {
		return 0, 0, err
	}
	return int64(s.Blocks) * int64(s.Bsize), int64(s.Bavail) * int64(s.Bsize), nil
}
