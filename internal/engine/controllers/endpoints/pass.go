package endpoints

import (
	"context"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/rollout"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Reconcile runs one pass for one endpoint: it maps the record and the router's samples to
// the rule's input (rules/rollout), decides, commits the decision, and then carries it out:
// the timers, the autoscalers' memory, the starts and the terminations.
func (c *Controller) Reconcile(ctx context.Context, key string) {
	c.inTurn(func() { c.reconcile(ctx, key) })
}

// reconcile is Reconcile in turn.
func (c *Controller) reconcile(ctx context.Context, key string) {
	now := c.clock.Now().UTC()
	var (
		rec          model.Endpoint
		exists, gone bool
		d            rollout.Decision
		toStart      []model.EndpointInstance
		toTerminate  []model.EndpointInstance
	)
	err := c.commit(func(tx *store.Tx) error {
		var err error
		if exists, err = tx.Get(store.Endpoints, key, &rec); err != nil || !exists {
			return err
		}
		if rec.Deleting {
			for i := range rec.Instances {
				rec.Instances[i].Terminating = true
			}
			if len(rec.Instances) == 0 {
				gone = true
				return tx.Delete(store.Endpoints, key)
			}
		} else {
			d = c.decide(rec, now)
			rec = d.Endpoint
			// Before the commit: no reader sees a state (Succeeded, a new split) that the
			// router does not serve yet.
			c.PushRouter(rec)
		}
		for _, in := range rec.Instances {
			switch {
			case in.Terminating:
				toTerminate = append(toTerminate, in)
			case in.State == api.EndpointInstanceStarting && in.StartedAt.IsZero():
				toStart = append(toStart, in)
			}
		}
		return tx.Put(store.Endpoints, key, rec)
	}, func() { c.SyncRouter(key) })
	if err != nil {
		c.setTimers(key, d) // a pass that did not commit is tried again at its deadlines
		if ctx.Err() == nil {
			c.log.Error("reconciling online endpoint failed", "endpoint", key, "error", err)
		}
		return
	}
	if exists && !rec.Deleting {
		c.committed(key, d)
	}
	if !exists || gone || rec.Deleting {
		c.scoring.RemoveEndpoint(model.NameOf(key))
		if gone || !exists {
			if c.quota != nil {
				c.quota.SetEndpoint(key, nil) // its instances are gone: it holds nothing
			}
		}
		if gone {
			c.log.Info("online endpoint deleted", "endpoint", key)
			c.keepScalers(key, nil)
		}
		if !rec.Deleting || gone {
			// Also when it was already gone: a delete that came late still returns.
			c.loop.Deleted(runtime.EndpointKey(key))
		}
	}
	// The lifecycle starts each node once (a node being created, or waiting for the driver
	// to report it ready, is left alone) and releases it once its start is done: the
	// start kicks the endpoint, and the next pass terminates the node it made.
	for _, in := range toStart {
		c.nodes[in.ID] = key
		c.startInstance(ctx, key, rec, in)
	}
	for _, in := range toTerminate {
		c.terminateInstance(ctx, key, in)
	}
}

// decide maps a live endpoint and the router's counts to the rule's input, decides, and
// gives the new instances their IDs. Callers are in turn.
func (c *Controller) decide(rec model.Endpoint, now time.Time) rollout.Decision {
	in := rollout.Input{Endpoint: rec, Scale: map[string]rollout.Scale{}, InFlight: map[string]int64{}}
	var stats map[string]router.DeploymentStats
	for dn, dep := range rec.Deployments {
		if !dep.Spec.ScaleSettings.Autoscaled() {
			continue
		}
		if stats == nil {
			stats = c.scoring.Stats(rec.Name)
		}
		s, st := c.scalerFor(rec.Key(), dn), stats[dn]
		in.Scale[dn] = rollout.Scale{
			Settings: ruleSettings(dep), History: s.hist, Next: s.next, Requests: s.requests, Kicked: s.kicked.Swap(false),
			// Mirror copies are not the deployment's load (DESIGN 4): they are left out.
			Sample: rollout.Sample{InFlight: max(st.InFlight-st.MirrorInFlight, 0) + st.Held, Requests: st.Requests},
		}
	}
	for _, x := range rec.Instances {
		if x.State == api.EndpointInstanceDraining {
			if n, known := c.scoring.InstanceInFlight(rec.Name, x.Deployment, x.ID); known {
				in.InFlight[x.ID] = n
			}
		}
	}
	d := rollout.Decide(in, now)
	for _, x := range d.Add {
		x.ID = c.newID("ep") // its port is asked of its node at start (assignPort)
		d.Endpoint.Instances = append(d.Endpoint.Instances, x)
	}
	return d
}

// committed carries out a committed decision: the drained instances' probes stop, the
// drain ends, restarts and autoscaler samples are timers, and the autoscalers keep their
// memory. Callers are in turn.
func (c *Controller) committed(key string, d rollout.Decision) {
	for _, id := range d.Drained {
		c.loop.RemoveTimer(ProbeTimer(id, probeReady))
		c.loop.RemoveTimer(ProbeTimer(id, probeLive))
		c.log.Debug("instance draining", "endpoint", key, "instance", id)
	}
	c.setTimers(key, d)
	for _, s := range d.Scaled {
		dec := s.Decision
		c.log.Info("deployment scaled", "endpoint", key, "deployment", s.Deployment, "from", dec.From, "to", dec.Desired,
			"reason", dec.Reason, "load", dec.Inputs.Load, "average_load", dec.Inputs.AverageLoad,
			"peak_need", dec.Inputs.PeakNeed, "kicked", s.Kicked)
		if m := c.metrics; m != nil {
			m.ScaleDecision(key, s.Deployment, dec.From, dec.Desired)
		}
	}
	c.keepScalers(key, d.Scale)
	if d.Provisioned {
		c.log.Info("online endpoint provisioned", "endpoint", key)
	}
}

// setTimers sets a decision's deadlines: the instances' drain ends and restarts, and the
// autoscaled deployments' next samples.
func (c *Controller) setTimers(key string, d rollout.Decision) {
	for id, at := range d.Steps {
		c.loop.SetTimer(endpointStepTimer(key, id), at)
	}
	for dn, s := range d.Scale {
		c.loop.SetTimer(scaleTimer(key, dn), s.Next)
	}
}

// keepScalers keeps the memory of an endpoint's autoscaled deployments after a pass and
// forgets the others. Callers are in turn.
func (c *Controller) keepScalers(key string, mem map[string]rollout.Scale) {
	for dn, m := range mem {
		s := c.scalerFor(key, dn)
		s.hist, s.next, s.requests = m.History, m.Next, m.Requests
	}
	for k := range c.scalers {
		if ep, dn, _ := strings.Cut(k, "\x00"); ep == key {
			if _, ok := mem[dn]; !ok {
				delete(c.scalers, k)
			}
		}
	}
}
