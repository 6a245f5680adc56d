// Package instances is the compute instances' controller. A compute instance is a compute
// of one node that a person uses. Its lifecycle is a rule (package rules/instance); this
// controller maps the store to the rule's input, commits its decision and acts on it
// (pass.go), keeps the settings valid, applies the users' start, stop and restart, counts
// open sessions and reported activity (the idle rule's inputs), and runs the setup scripts
// on the node (setup.go).
package instances

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/idle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/instance"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Core is what the controller uses of the compute core (package computes).
type Core interface {
	computes.Records
	computes.Transactions
	computes.Kicker
	computes.NodeLifecycle
	computes.Runtime
}

// Config is what the controller is built from.
type Config struct {
	Core Core
	// MinIdleShutdown is the engine's idle-shutdown policy minimum.
	MinIdleShutdown time.Duration
	// DataDir is the engine's data directory, where setup scripts' output is kept.
	DataDir string
	// NodeAPI tells applications on instances' nodes how to report activity.
	NodeAPI NodeAPI
}

// Controller runs compute instances on the shared compute core.
type Controller struct {
	core            Core
	log             hclog.Logger
	minIdleShutdown time.Duration
	dataDir         string
	nodeAPI         NodeAPI
	sessions        sessions
}

// sessions counts open interactive sessions per compute key.
type sessions struct {
	mu   sync.Mutex
	open map[string]int
}

func (s *sessions) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[key]
}

func (s *sessions) add(key string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open[key] = max(s.open[key]+delta, 0)
}

// New builds the controller. Its Pass decides the passes of compute instances (the engine
// registers it with the core).
func New(cfg Config) *Controller {
	return &Controller{
		core: cfg.Core, log: cfg.Core.Logger().Named("instances"), minIdleShutdown: cfg.MinIdleShutdown,
		dataDir: cfg.DataDir, nodeAPI: cfg.NodeAPI, sessions: sessions{open: map[string]int{}},
	}
}

// Create validates an instance spec and stores the instance, which starts at once.
func (c *Controller) Create(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	if err := validation.ComputeName.Check("name", spec.Name); err != nil {
		return nil, err
	}
	size, err := validation.VMSize("vm_size", spec.VMSize, catalog.ComputeInstance)
	if err != nil {
		return nil, err
	}
	settings := normalizeInstance(spec.Instance)
	if err := c.validateInstance(settings); err != nil {
		return nil, err
	}
	now := c.core.Clock().Now().UTC()
	rec := model.Compute{
		Workspace: workspace, Name: spec.Name, Type: api.TypeComputeInstance, VMSize: size.Name,
		VMPriority: api.PriorityDedicated, Description: spec.Description, Tags: spec.Tags, CreatedOn: now,
		Instance: &model.Instance{Settings: settings, Lifecycle: instance.New(now)},
	}
	return c.core.Insert(ctx, rec, idempotencyKey, rec.QuotaField())
}

// Update changes an instance's description, tags, size and settings in place.
func (c *Controller) Update(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	return c.core.Modify(ctx, workspace, name, func(_ *api.Workspace, rec *model.Compute) error {
		if upd.ScaleSettings != nil {
			return api.Errorf(api.CodeInvalid, "scale_settings", "compute instance %q has no scale settings", name)
		}
		rec.Description, rec.Tags = upd.Description, upd.Tags
		return c.updateInstance(rec, upd, c.core.Clock().Now().UTC())
	})
}

// activity is an instance's activity as the idle rule sees it.
func (c *Controller) activity(rec model.Compute) idle.Activity {
	a := idle.Activity{LastActivity: rec.Instance.LastActivity, OpenSessions: c.sessions.count(rec.Key())}
	if rec.Instance.State == api.InstanceJobRunning {
		a.RunningJobs = 1
	}
	return a
}

// InstanceAction starts, stops or restarts an instance for a user.
func (c *Controller) InstanceAction(_ context.Context, workspace, name, action string) (*api.Compute, error) {
	now := c.core.Clock().Now().UTC()
	err := c.core.Write(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		if rec.Instance == nil {
			return api.Errorf(api.CodeInvalid, "", "compute %q is a %s; only compute instances start and stop", name, rec.Type)
		}
		if err := rec.Instance.Act(action, now); err != nil {
			return err
		}
		return tx.Put(store.Computes, rec.Key(), rec)
	})
	if err != nil {
		return nil, err
	}
	c.core.Kick(workspace + "/" + name)
	return c.core.GetCompute(context.Background(), workspace, name)
}

// touch records activity at now on a stored instance; before runs first, in the same turn
// (a session's close).
func (c *Controller) touch(workspace, name string, before func()) error {
	return c.core.Write(func(tx *store.Tx) error {
		if before != nil {
			before()
		}
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Instance == nil {
			return model.NotFoundCompute(workspace, name)
		}
		rec.Instance.Touch(c.core.Clock().Now().UTC())
		return tx.Put(store.Computes, rec.Key(), rec)
	})
}

// ReportActivity records activity on an instance reported by an application on it.
func (c *Controller) ReportActivity(_ context.Context, workspace, name string) error {
	err := c.touch(workspace, name, nil)
	if err == nil {
		c.core.Kick(workspace + "/" + name)
	}
	return err
}

// OpenSession and CloseSession count interactive sessions on an instance: an open
// session keeps it awake, and closing one counts as activity.
func (c *Controller) OpenSession(workspace, name string) {
	c.sessions.add(workspace+"/"+name, 1)
	c.core.Kick(workspace + "/" + name)
}

func (c *Controller) CloseSession(workspace, name string) {
	key := workspace + "/" + name
	// The count drops in turn with the passes, together with the activity it leaves.
	_ = c.touch(workspace, name, func() { c.sessions.add(key, -1) })
	c.core.Kick(key)
}

// Exec runs an interactive session on a running instance's node. The session counts as
// activity from when it opens until it closes.
func (c *Controller) Exec(ctx context.Context, workspace, name string, command []string, stdin io.Reader, output io.Writer) (int, error) {
	if len(command) == 0 {
		return 0, api.Errorf(api.CodeInvalid, "command", "exec needs a command")
	}
	var node string
	var env map[string]string
	err := c.core.View(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		if rec.Instance == nil {
			return api.Errorf(api.CodeInvalid, "", "compute %q is a %s; sessions open on compute instances", name, rec.Type)
		}
		if s := rec.Instance.State; s != api.InstanceRunning && s != api.InstanceJobRunning {
			return api.Errorf(api.CodeConflict, "", "compute instance %q is %s; start it first (mlcompute compute start)", name, s)
		}
		env = c.nodeEnv(rec)
		nodes, err := store.List[model.Node](tx, store.Nodes, rec.Key()+"/")
		for _, n := range nodes {
			if !n.Released {
				node = n.ID
			}
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	// A session ends with its connection or with the engine: its command never outlives both.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.core.Lifetime(), cancel)()
	c.OpenSession(workspace, name)
	defer c.CloseSession(workspace, name)
	c.log.Info("session opened", "compute", workspace+"/"+name)
	code, err := c.core.Tasks().Exec(ctx, node, driver.ExecSpec{Command: command, Stdin: stdin, Output: output,
		Env: env})
	c.log.Info("session closed", "compute", workspace+"/"+name, "exit_code", code)
	return code, err
}
