package platform

import "syscall"

// childAttr makes the kernel SIGKILL a child when this process dies, so
// that no instance outlives the platform even when it is killed itself.
// (Pdeathsig follows the thread that started the child; the Go runtime
// ends threads only for goroutines that exit locked to one, which this
// package never does. The standard input pipe is the second guard.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
