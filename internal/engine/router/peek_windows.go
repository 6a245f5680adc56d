//go:build windows

package router

// peekFunc returns the check idleAlive runs on the connection's descriptor. Windows has
// no engine of its own (the embedded engine does not start there), so an idle connection
// counts as alive and a dead one fails on use, as without the check.
func (c *upConn) peekFunc() func(fd uintptr) bool {
	return func(uintptr) bool {
		c.quiet = true
		return true
	}
}
