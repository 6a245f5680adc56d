package endpoints

import (
	"context"
	"fmt"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// assignPort asks an instance's ready node for the port its process listens on (PORT),
// just before the process starts, and commits it with the instance before the start: an
// engine that restarts then adopts the process on the port it listens on. A port an
// earlier start committed stays.
func (c *Controller) assignPort(ctx context.Context, key string, in model.EndpointInstance) (int, error) {
	port, err := c.tasks.TaskPort(ctx, in.ID)
	if err != nil {
		return 0, fmt.Errorf("asking its node for a port: %w", err)
	}
	c.inTurn(func() {
		err = c.updateEndpointInstance(key, in.ID, func(_ *model.Endpoint, cur *model.EndpointInstance) {
			if cur.Port != 0 {
				port = cur.Port
				return
			}
			cur.Port = port
		})
	})
	return port, err
}
