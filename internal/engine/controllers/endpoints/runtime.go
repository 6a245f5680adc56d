package endpoints

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/routertable"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/serving"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/lifecycle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/rollout"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tasks"
)

// The endpoint runtime keeps every deployment at its target count (instance_count, or the
// autoscaler's decision), each instance a node of the engine's driver running the
// deployment's command as a task with PORT set. What an endpoint's instances do next (adds,
// drains, the rollout, the split, restarts, the back-off and Failed after three failed
// starts) is one pure rule, rules/rollout; a pass (pass.go) maps the record to it, commits
// its decision, and then carries it out. The rest is here and in probes.go:
//
//   - An instance takes traffic once its readiness probe passed success_threshold times in
//     a row, and stops taking it after failure_threshold failures in a row.
//   - failure_threshold liveness failures in a row, or the process exiting, fail the
//     instance (rollout.Fail); a lost node is created again under the same key.
//   - A process that never becomes ready within initial_delay + period * failure_threshold
//     counts as a failed start.
//   - Delete takes the endpoint out of the router and terminates every instance at once.
//
// Probes and restarts are deadlines in the engine's timer queue, so the rules run on the
// injected clock. Decisions are committed before they are acted on; the instances live in
// the endpoint's record, so a restarted engine adopts their nodes and resumes the probes.

// The two probes of an endpoint instance, as probe timers name them.
const (
	probeReady = "ready"
	probeLive  = "live"
)

// Config is what the endpoints controller is built from.
type Config struct {
	Store     *store.Store
	Clock     clock.WithTicker
	Logger    hclog.Logger
	Loop      *runtime.Loop
	Snapshots model.SnapshotStore
	// Artifacts is the store of job outputs, which deployments' models can be; nil
	// refuses such a model.
	Artifacts *artifacts.Store
	// NewID makes instance IDs ("<prefix>-<unique>").
	NewID func(prefix string) string
	// EnvCacheDir is the environment cache every local node of this machine shares; empty
	// when nodes keep their own (~/.mlcompute/envs on the node).
	EnvCacheDir string
	// Quota is the workspaces' quota sums the computes share. The API records there what an
	// endpoint's deployments hold (package endpointapi); the controller drops it once a
	// deleted endpoint's instances are gone. nil keeps no sums.
	Quota *model.QuotaIndex
	// Metrics receives the autoscaler's measures; nil records nothing.
	Metrics Metrics
	// Nodes is the engine's node lifecycle, which creates and releases the instances' nodes
	// and routes the driver's events about them back (HandleNodeEvent).
	Nodes *lifecycle.Nodes
	// Tasks starts, kills and reads the instances' processes on their nodes.
	Tasks *tasks.Tasks
	// Scoring is the scoring front whose router carries the endpoints' traffic.
	Scoring Scoring
	// Turns is the computes' write path (computes.Core), which the endpoints' writers take
	// turns in.
	Turns computes.Turns
}

// Controller runs online endpoints: it reconciles each endpoint's instances against its
// deployments, probes them, moves traffic once a rollout is ready, and keeps the scoring
// router's table in step with the store. Its writes of endpoint records, and the API's
// (package endpointapi), take their turns with the computes' writers (write.go).
type Controller struct {
	store     *store.Store
	clock     clock.WithTicker
	log       hclog.Logger
	loop      *runtime.Loop
	serving   serving.Tasks
	newID     func(prefix string) string
	lifecycle *lifecycle.Nodes
	tasks     *tasks.Tasks
	// ctx is the engine's lifetime, set by Start.
	ctx context.Context

	scoring Scoring
	probe   atomic.Pointer[serving.Prober]

	// turns serialises the endpoints' read-check-write sequences with every other writer
	// (write.go); the fields below it are guarded by the turn.
	turns  computes.Turns
	nodes  map[string]string // instance ID -> endpoint key
	probes map[string]*probeState
	// kills are processes of failed instances, killed once the failure is committed.
	kills [][2]string
	// scalers are the autoscaled deployments' autoscalers (autoscale.go).
	scalers map[string]*scaler
	// coldStarts are the node and process phases of starts whose readiness is awaited.
	coldStarts map[string]coldStart
	quota      *model.QuotaIndex
	metrics    Metrics
}

// probeState counts consecutive probe results of one process (task).
type probeState struct {
	task string
	rollout.Counts
}

// New builds the controller; the loop must route runtime.Endpoint keys to Reconcile.
func New(cfg Config) *Controller {
	c := &Controller{
		store: cfg.Store, clock: cfg.Clock, log: cfg.Logger.Named("endpoints"), loop: cfg.Loop,
		serving: serving.Tasks{Snapshots: cfg.Snapshots, Artifacts: cfg.Artifacts, EnvCache: cfg.EnvCacheDir}, newID: cfg.NewID, ctx: context.Background(),
		lifecycle:  cfg.Nodes,
		tasks:      cfg.Tasks,
		nodes:      map[string]string{},
		probes:     map[string]*probeState{},
		scalers:    map[string]*scaler{},
		coldStarts: map[string]coldStart{},
		quota:      cfg.Quota,
		metrics:    cfg.Metrics,
		scoring:    cfg.Scoring,
		turns:      cfg.Turns,
	}
	c.probe.Store(ptr(serving.Prober(serving.HTTPProbe)))
	return c
}

// Start gives the controller the engine's lifetime; call Recover next.
func (c *Controller) Start(ctx context.Context) { c.ctx = ctx }

func ptr[T any](v T) *T { return &v }

// startInstance has the lifecycle create the instance's node (idempotent under its key),
// then starts its current process and schedules its probes. A node created not ready (a
// pod being scheduled, a queued Slurm allocation) waits: the driver's NodeReady kicks the
// endpoint, and the next pass starts it again.
func (c *Controller) startInstance(ctx context.Context, key string, rec model.Endpoint, in model.EndpointInstance) {
	size, _ := catalog.Lookup(in.Process.InstanceType)
	began := c.clock.Now()
	spec := driver.NodeSpec{Key: in.ID, Owner: api.EndpointID(rec.Workspace, rec.Name), VMSize: size.Name, VCPUs: size.VCPUs, MemoryGB: size.MemoryGB}
	c.lifecycle.Create(ctx, c, spec, func(info driver.NodeInfo, err error) {
		if err == nil && !info.Ready {
			c.log.Debug("instance waits for its node", "endpoint", key, "instance", in.ID, "reason", info.Reason)
			return
		}
		c.startProcess(ctx, key, in, info, err, began)
	})
}

// startProcess starts an instance's process on its new node (or records why the node could
// not be made) and schedules its probes.
func (c *Controller) startProcess(ctx context.Context, key string, in model.EndpointInstance, info driver.NodeInfo, err error, began time.Time) {
	spec := in.Process
	nodeUp := c.clock.Now()
	if err == nil && in.Port == 0 {
		in.Port, err = c.assignPort(ctx, key, in)
	}
	if err == nil {
		var task driver.TaskSpec
		var release func()
		task, release, err = c.serving.Task(ctx, in.Task, spec, in.Port)
		if err == nil {
			err = c.tasks.StartTask(ctx, in.ID, task)
		}
		release() // the driver copied the model before the command started
	}
	if ctx.Err() != nil {
		return
	}
	c.inTurn(func() { c.processStarted(key, in, info, err, began, nodeUp) })
	if err == nil {
		// An exit before the start was recorded was ignored by HandleNodeEvent: look now.
		if st, serr := c.tasks.TaskStatus(ctx, in.ID, in.Task); serr == nil && !st.Running {
			c.HandleNodeEvent(ctx, driver.Event{Kind: driver.TaskExited, NodeKey: in.ID, TaskKey: in.Task, ExitCode: st.ExitCode})
		}
	}
	c.kick(key)
}

// processStarted records how an instance's start went (err) and schedules its probes.
// Callers are in turn.
func (c *Controller) processStarted(key string, in model.EndpointInstance, info driver.NodeInfo, err error, began, nodeUp time.Time) {
	now := c.clock.Now().UTC()
	_ = c.updateEndpointInstance(key, in.ID, func(rec *model.Endpoint, cur *model.EndpointInstance) {
		if cur.Task != in.Task || cur.Terminating || cur.State != api.EndpointInstanceStarting {
			return
		}
		if err != nil {
			c.instanceFailed(rec, cur, fmt.Sprintf("starting it failed: %v", err), now)
			return
		}
		cur.Host, cur.StartedAt = info.Address, now
		c.coldStarts[cur.ID] = coldStart{node: nodeUp.Sub(began), process: now.Sub(nodeUp)}
		d, ok := rec.Deployment(cur.Deployment)
		if !ok {
			return // removed meanwhile: the next pass drains it
		}
		c.probes[cur.ID] = &probeState{task: cur.Task}
		times := d.Times()
		c.loop.SetTimer(ProbeTimer(cur.ID, probeReady), now.Add(times.Readiness.InitialDelay))
		c.loop.SetTimer(ProbeTimer(cur.ID, probeLive), now.Add(times.Liveness.InitialDelay))
		c.log.Debug("instance started", "endpoint", key, "instance", cur.ID, "task", cur.Task, "port", cur.Port)
	})
}

// instanceFailed marks an instance failed, kills its process and schedules its restart.
// Callers are in turn and commit rec.
func (c *Controller) instanceFailed(rec *model.Endpoint, in *model.EndpointInstance, why string, now time.Time) {
	wait := rollout.Fail(rec, in, why, now)
	delete(c.probes, in.ID)
	c.loop.RemoveTimer(ProbeTimer(in.ID, probeReady))
	c.loop.RemoveTimer(ProbeTimer(in.ID, probeLive))
	c.loop.SetTimer(endpointStepTimer(rec.Key(), in.ID), in.RestartAt)
	c.log.Warn("endpoint instance failed; restarting", "endpoint", rec.Key(), "instance", in.ID, "reason", why, "restart_in", wait)
	// Killed after the commit, by updateEndpointInstance.
	c.kills = append(c.kills, [2]string{in.ID, in.Task})
}

// updateEndpointInstance applies f to one stored instance and, when f changed anything,
// commits and pushes the router; most probe results change nothing and write nothing.
// Callers are in turn, as every writer of endpoint records is, so the record read here is
// still current when it is written.
func (c *Controller) updateEndpointInstance(key, id string, f func(*model.Endpoint, *model.EndpointInstance)) error {
	var rec model.Endpoint
	idx := -1
	err := c.store.View(func(tx *store.Tx) error {
		ok, err := tx.Get(store.Endpoints, key, &rec)
		if err != nil || !ok {
			return err
		}
		idx = slices.IndexFunc(rec.Instances, func(in model.EndpointInstance) bool { return in.ID == id })
		return nil
	})
	if err == nil && idx >= 0 {
		before, _ := json.Marshal(rec)
		f(&rec, &rec.Instances[idx])
		if after, _ := json.Marshal(rec); !bytes.Equal(before, after) {
			err = c.commit(func(tx *store.Tx) error {
				if !rec.Deleting {
					c.PushRouter(rec) // before the commit, as in Reconcile
				}
				return tx.Put(store.Endpoints, key, rec)
			}, func() { c.SyncRouter(key) })
		}
	}
	if err == nil {
		for _, k := range c.kills {
			c.tasks.KillAfterCommit(k[0], k[1])
		}
	}
	c.kills = nil
	return err
}

// terminateInstance has the lifecycle terminate an instance's node and, once the driver
// confirms, removes the instance; on a failure the next pass terminates it again.
func (c *Controller) terminateInstance(ctx context.Context, key string, in model.EndpointInstance) {
	c.lifecycle.Release(ctx, in.ID, endpointStepTimer(key, in.ID), func() (err error) {
		c.inTurn(func() { err = c.instanceGone(key, in.ID) })
		return err
	}, func() {
		c.log.Info("endpoint instance terminated", "endpoint", key, "instance", in.ID)
		c.kick(key)
	})
}

// instanceGone removes a terminated instance from its endpoint and forgets it. Callers
// are in turn.
func (c *Controller) instanceGone(key, id string) error {
	err := c.commit(func(tx *store.Tx) error {
		var rec model.Endpoint
		ok, err := tx.Get(store.Endpoints, key, &rec)
		if err != nil || !ok {
			return err
		}
		rec.Instances = slices.DeleteFunc(rec.Instances, func(x model.EndpointInstance) bool { return x.ID == id })
		return tx.Put(store.Endpoints, key, rec)
	}, nil)
	if err == nil {
		delete(c.nodes, id)
		delete(c.probes, id)
		delete(c.coldStarts, id)
		c.loop.RemoveTimer(ProbeTimer(id, probeReady))
		c.loop.RemoveTimer(ProbeTimer(id, probeLive))
		c.loop.RemoveTimer(endpointStepTimer(key, id))
	}
	return err
}

// SyncRouter gives the router the endpoint's stored table: after a write that pushed its
// own table failed to commit, and at start. Callers are in turn.
func (c *Controller) SyncRouter(key string) {
	var rec model.Endpoint
	exists := false
	err := c.store.View(func(tx *store.Tx) (err error) {
		exists, err = tx.Get(store.Endpoints, key, &rec)
		return err
	})
	switch {
	case err != nil:
		c.log.Error("reading online endpoint for the router failed", "endpoint", key, "error", err)
	case exists && !rec.Deleting:
		c.PushRouter(rec)
	default:
		c.scoring.RemoveEndpoint(model.NameOf(key))
	}
}

// PushRouter gives the router the endpoint's current table (package routertable).
// Callers are in turn.
func (c *Controller) PushRouter(rec model.Endpoint) {
	key := rec.Key()
	c.scoring.SetEndpoint(routertable.Of(rec, routertable.Hooks{
		VerifyToken: func(token string) bool { return c.scoring.VerifyToken(key, token) },
		Hold:        func(dn string, d model.Deployment, h *router.Hold) { c.holdHooks(key, dn, d, h) },
	}))
}

// kick marks an endpoint for a reconcile pass.
func (c *Controller) kick(key string) { c.loop.Mark(runtime.EndpointKey(key)) }

func endpointStepTimer(endpointKey, instanceID string) runtime.Timer {
	return runtime.Timer{Kind: runtime.EndpointStep, Object: runtime.EndpointKey(endpointKey), Sub: instanceID}
}

// ProbeTimer is the timer of one probe of an endpoint instance; when it fires the engine
// calls RunProbe(instanceID, probe).
func ProbeTimer(instanceID, probe string) runtime.Timer {
	return runtime.Timer{Kind: runtime.Probe, Object: runtime.Key{Kind: runtime.EndpointInstance, Name: instanceID}, Sub: probe}
}
