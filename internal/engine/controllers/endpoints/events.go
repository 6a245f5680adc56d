package endpoints

import (
	"context"
	"fmt"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Endpoint instances and the world outside the engine: driver events about their
// processes and nodes, and adoption after an engine restart.

// HandleNodeEvent applies a driver event about an endpoint instance's node
// (lifecycle.Owner).
func (c *Controller) HandleNodeEvent(ctx context.Context, ev driver.Event) {
	var key string
	var ok bool
	c.inTurn(func() { key, ok = c.nodes[ev.NodeKey] })
	if !ok {
		return // terminated meanwhile
	}
	if ev.Kind == driver.NodeWaiting {
		return // a start waiting for the node goes on waiting
	}
	if ev.Kind == driver.NodeReady {
		// A node that came up after its Create: the start waiting for it goes on.
		c.kick(key)
		return
	}
	why := "its node was lost"
	if ev.Kind == driver.TaskExited {
		why = fmt.Sprintf("its command exited with code %d", ev.ExitCode)
		if out, err := c.tasks.TaskOutput(ctx, ev.NodeKey, ev.TaskKey, 0); err == nil && len(out) > 0 {
			why += "; output: " + tail(string(out), 400)
		}
	}
	c.inTurn(func() { c.nodeLost(key, ev, why) })
	c.kick(key)
}

// nodeLost fails an instance whose node or process was lost (ev), unless it is on its way
// out already or ev is about a process it no longer runs. Callers are in turn.
func (c *Controller) nodeLost(key string, ev driver.Event, why string) {
	now := c.clock.Now().UTC()
	_ = c.updateEndpointInstance(key, ev.NodeKey, func(rec *model.Endpoint, in *model.EndpointInstance) {
		if in.Terminating || in.State == api.EndpointInstanceDraining || in.State == api.EndpointInstanceFailed {
			return
		}
		if ev.Kind == driver.TaskExited && ev.TaskKey != in.Task {
			return
		}
		if ev.Kind == driver.TaskExited && in.StartedAt.IsZero() {
			return // the start is still being recorded; startInstance checks the status after
		}
		c.instanceFailed(rec, in, why, now)
	})
}

// adopted resumes the probes of an instance whose process a restarted engine found
// running (alive), or fails it. Callers are in turn.
func (c *Controller) adopted(key, id string, alive bool) {
	now := c.clock.Now().UTC()
	_ = c.updateEndpointInstance(key, id, func(r *model.Endpoint, cur *model.EndpointInstance) {
		if !alive {
			c.instanceFailed(r, cur, "it was not running when the engine started", now)
			return
		}
		c.probes[cur.ID] = &probeState{task: cur.Task}
		c.loop.SetTimer(ProbeTimer(cur.ID, probeReady), now)
		c.loop.SetTimer(ProbeTimer(cur.ID, probeLive), now)
	})
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// NodeKeys lists the nodes endpoint instances hold, for the lifecycle to route their events
// from the engine's start on (and not take them for orphans).
func (c *Controller) NodeKeys() ([]string, error) {
	var ids []string
	err := c.store.View(func(tx *store.Tx) error {
		recs, err := store.List[model.Endpoint](tx, store.Endpoints, "")
		for _, rec := range recs {
			for _, in := range rec.Instances {
				ids = append(ids, in.ID)
			}
		}
		return err
	})
	return ids, err
}

// recoverEndpoints adopts the instances a previous run left: a live process keeps its state
// and its probes resume; a dead one is restarted. The router table is rebuilt here, before
// Start returns, because the stored state still says Succeeded: a scoring request that
// arrives before the first pass must reach the adopted instances, not find no endpoint.
// Then every endpoint gets a pass.
func (c *Controller) Recover(ctx context.Context) error {
	var recs []model.Endpoint
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		recs, err = store.List[model.Endpoint](tx, store.Endpoints, "")
		return err
	})
	if err != nil {
		return fmt.Errorf("reading online endpoints: %w", err)
	}
	for _, rec := range recs {
		for _, in := range rec.Instances {
			c.inTurn(func() { c.nodes[in.ID] = rec.Key() })
			if in.Terminating || in.StartedAt.IsZero() || in.State == api.EndpointInstanceFailed || in.State == api.EndpointInstanceDraining {
				continue // the pass terminates, starts or restarts it
			}
			alive := false
			if gone, err := c.lifecycle.Adopt(ctx, in.ID); err == nil && !gone {
				st, err := c.lifecycle.Task(ctx, in.ID, in.Task)
				alive = err == nil && st.Running
			}
			c.inTurn(func() { c.adopted(rec.Key(), in.ID, alive) })
		}
		c.inTurn(func() { c.SyncRouter(rec.Key()) })
		c.kick(rec.Key())
	}
	return nil
}
