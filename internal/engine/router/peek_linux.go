//go:build linux

package router

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// peekFunc returns the check idleAlive runs on the connection's descriptor: a recvfrom(2)
// with MSG_PEEK|MSG_DONTWAIT, without a source address (unix.Recvfrom would allocate one).
func (c *upConn) peekFunc() func(fd uintptr) bool {
	return func(fd uintptr) bool {
		_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.peekBuf[0])), 1,
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		c.quiet = errno == unix.EAGAIN
		return true // never wait for readiness
	}
}
