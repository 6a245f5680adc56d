package endpoints

import "github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"

// commit is the one way the controller writes endpoint records: f runs in a write
// transaction. f may change, before the commit, what the controller holds in memory for
// the records it writes (the router's table, the quota index), as the passes do, so that
// no reader sees a committed state the router does not serve yet; undo, when given, puts
// that back when the transaction does not commit. Callers hold c.mu, which every writer
// of endpoint records holds (write takes it).
func (c *Controller) commit(f func(tx *store.Tx) error, undo func()) error {
	err := c.store.Update(f)
	if err != nil && undo != nil {
		undo()
	}
	return err
}

// write is commit for the API's calls and the events that come from outside a pass: it
// takes c.mu for the write.
func (c *Controller) write(f func(tx *store.Tx) error, undo func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commit(f, undo)
}
