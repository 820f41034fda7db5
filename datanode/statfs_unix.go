//go:build unix

package datanode

import "syscall"

// statfs returns the size of the file system holding dir and the space
// available on it to unprivileged users.
func statfs(dir string) (total, avail int64, err error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(dir, &s); err != nil {
		return 0, 0, err
	}
	return int64(s.Blocks) * int64(s.Bsize), int64(s.Bavail) * int64(s.Bsize), nil
}
