package leanserver

import "time"

// A request whose handler is still running after watchDelay has its connection watched
// for the client going away, as net/http watches every request's: a read that ends in an
// error (the client closed or reset the connection) cancels the request's context. Bytes
// that arrive instead (a pipelined next request) stay in the buffer and end the watch.
// The read starts only once the handler has read the whole body, which it reads from the
// same buffer.

// watch arms the watch for x, whose handler is about to run.
func (c *conn) watch(x *exchange) {
	c.watchMu.Lock()
	c.watched = x
	if c.watchTimer == nil {
		// On a goroutine of its own: a fake clock runs the callback in its Step, and
		// watchFired may read the connection until the client goes away.
		c.watchTimer = c.s.clock.AfterFunc(watchDelay, func() { go c.watchFired() })
	} else {
		c.watchTimer.Reset(watchDelay)
	}
	c.watchMu.Unlock()
}

// unwatch ends the watch after the handler returned: the timer is stopped, and a read
// under way is interrupted and waited for.
func (c *conn) unwatch() {
	c.watchTimer.Stop()
	c.watchMu.Lock()
	c.watched = nil
	watching, done := c.watching, c.watchDone
	c.watching = false
	c.watchMu.Unlock()
	if !watching {
		return
	}
	c.stopWatch.Store(true)
	_ = c.nc.SetReadDeadline(aLongTimeAgo)
	<-done
	_ = c.nc.SetReadDeadline(time.Time{})
	c.stopWatch.Store(false)
}

// watchFired runs on the timer's goroutine: it reads the connection until the client
// goes away, sends bytes, or unwatch interrupts it.
func (c *conn) watchFired() {
	if c.s.onWatch != nil {
		defer c.s.onWatch()
	}
	c.watchMu.Lock()
	x := c.watched
	if x == nil || c.watching {
		c.watchMu.Unlock()
		return
	}
	if !x.body.done.Load() {
		// The handler is still reading the body from the buffer: look again later.
		c.watchTimer.Reset(watchDelay)
		c.watchMu.Unlock()
		return
	}
	done := make(chan struct{})
	c.watching, c.watchDone = true, done
	c.watchMu.Unlock()

	defer close(done)
	if c.br.Buffered() > 0 {
		return // a pipelined request is already here: the client is not gone
	}
	if _, err := c.br.Peek(1); err != nil && !c.stopWatch.Load() {
		c.clientGone(x)
	}
}
