package kubernetes

import (
	"context"
	"fmt"
)

// TaskPort is the port every task of a node is given: 29500, torch.distributed's usual
// MASTER_PORT. A fixed port is right here, where asking the node would be for other
// drivers: a node is a pod of its own, never on the host's network (the pod spec sets no
// hostNetwork), so its network namespace holds no one's listener but its own tasks', and
// of those only one uses the port at a time (a job's rank, or an endpoint instance's
// serving process). Two pods on one Kubernetes node each have the port to themselves, and
// a well-known port is what a cluster's network policies can name in advance.
const TaskPort = 29500

// TaskPort returns TaskPort once the node's pod is running; ErrTransient while it is
// pending, ErrNotFound once it is gone.
func (d *Driver) TaskPort(ctx context.Context, nodeKey string) (int, error) {
	if _, err := d.readyNode(ctx, nodeKey); err != nil {
		return 0, fmt.Errorf("finding a port: %w", err)
	}
	return TaskPort, nil
}
