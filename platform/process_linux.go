package platform

import "syscall"

// childAttr puts a child in a process group of its own, so that a
// terminal's Ctrl-C reaches only the platform, which then stops its
// instances itself (rather than see them all exit at once and start
// others in their place), and makes the kernel SIGKILL the child when
// this process dies, so that no instance outlives the platform even when
// the platform is killed. (Pdeathsig follows the thread that started the
// child; the Go runtime ends threads only for goroutines that exit locked
// to one, which this package never does. The standard input pipe is the
// second guard.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
