//go:build !linux

package platform

import "syscall"

// childAttr: no parent-death signal outside Linux; the child's standard
// input reaching EOF is what ends it.
func childAttr() *syscall.SysProcAttr { return nil }
