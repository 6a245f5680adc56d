//go:build unix && !linux

package router

import (
	"errors"

	"golang.org/x/sys/unix"
)

// peekFunc returns the check idleAlive runs on the connection's descriptor: a recvfrom(2)
// with MSG_PEEK|MSG_DONTWAIT.
func (c *upConn) peekFunc() func(fd uintptr) bool {
	return func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), c.peekBuf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		c.quiet = errors.Is(err, unix.EAGAIN)
		return true // never wait for readiness
	}
}
