package endpoints

import "github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"

// The controller writes endpoint records through the computes' write path
// (computes.Turns), as the endpoints' API does (package endpointapi): every read-check-write sequence of the endpoints runs in the turn the
// computes' writers take too, so a quota check sees what either kind of record holds, and
// the controller's in-memory state (the maps of Controller) is guarded by that turn, not
// by a lock of its own.

// commit is the one way the controller writes endpoint records: f runs in a write
// transaction. f may change, before the commit, what the controller holds in memory for
// the records it writes (the router's table, the quota index), as the passes do, so that
// no reader sees a committed state the router does not serve yet; undo, when given, puts
// that back when the transaction does not commit. Callers are in turn (inTurn).
func (c *Controller) commit(f func(tx *store.Tx) error, undo func()) error {
	return c.turns.WriteInTurn(f, undo)
}

// inTurn runs f in the writers' turn.
func (c *Controller) inTurn(f func()) { c.turns.Turn(f) }
