//go:build !linux

package platform

import "syscall"

// childAttr: a process group of its own (see process_linux.go); no
// parent-death signal outside Linux, so the child's standard input
// reaching EOF is what ends it when the platform dies.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
