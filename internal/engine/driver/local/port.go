package local

import (
	"context"
	"fmt"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// TaskPort returns a port free on this machine's loopback, where every local node's tasks
// listen (Address); ErrNotFound if the node is gone.
func (d *Driver) TaskPort(ctx context.Context, nodeKey string) (int, error) {
	if _, err := d.watched(ctx, nodeKey); err != nil {
		return 0, fmt.Errorf("finding a port on node %s: %w", nodeKey, err)
	}
	return driver.LoopbackPort()
}
