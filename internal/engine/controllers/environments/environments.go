// Package environments is the environments' controller: create, read, update and delete
// environment records (DESIGN 8). An environment is a definition: its content hash is
// computed here by rules/environment, and nothing is built until a job that names it
// starts on a node (the compute core does that, from the copy the job keeps).
package environments

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/envprep"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Config is what the environments controller is built from.
type Config struct {
	Store  *store.Store
	Clock  clock.PassiveClock
	Logger hclog.Logger
	// CacheDir is the environment cache of this machine's local nodes, where Collect removes
	// builds nothing uses; empty when nodes keep their own caches (nothing is collected).
	CacheDir string
	// OnChange, when set, is called after an environment's content hash changed (the
	// endpoints roll out the deployments that run in it).
	OnChange func(workspace, name string)
	// Snapshots holds the uploaded image archives (nil: none is checked).
	Snapshots model.SnapshotStore
	// NoContainerRuntime says why the engine's nodes of an instance type cannot run
	// container images, or is "" when they can: an environment a deployment runs in
	// becomes a container one only where the deployment's instances can run it.
	NoContainerRuntime func(instanceType string) string
	// ContainerdAddress is the containerd of this machine's local nodes, whose environment
	// images Collect removes when nothing uses them; empty: none.
	ContainerdAddress string
}

// Controller manages environment records.
type Controller struct {
	store     *store.Store
	clock     clock.PassiveClock
	log       hclog.Logger
	onChange  func(workspace, name string)
	cacheDir  string
	snapshots model.SnapshotStore
	noRuntime func(instanceType string) string // see Config.NoContainerRuntime
	// containerd is Config.ContainerdAddress.
	containerd string
	// collecting is held by the one Collect that runs; collectAgain asks it for one more
	// pass when a request came while it ran.
	collecting   sync.Mutex
	collectAgain atomic.Bool
	mu           sync.Mutex // serialises writers, so a create's existence check holds until it commits
}

// New builds the controller.
func New(cfg Config) *Controller {
	return &Controller{store: cfg.Store, clock: cfg.Clock, log: cfg.Logger.Named("environments"), onChange: cfg.OnChange, cacheDir: cfg.CacheDir, snapshots: cfg.Snapshots,
		noRuntime: cfg.NoContainerRuntime, containerd: cfg.ContainerdAddress}
}

// Name names the controller in logs.
func (c *Controller) Name() string { return "environments" }

// Create stores a new environment with its content hash. A retry with the same idempotency
// key returns the environment the first attempt made; any other create of a taken name is
// a conflict.
func (c *Controller) Create(_ context.Context, workspace string, spec api.EnvironmentSpec, idempotencyKey string) (*api.Environment, error) {
	if err := validation.Environment(spec); err != nil {
		return nil, err
	}
	if err := c.checkUploaded(spec.Container); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out model.Environment
	id := api.EnvironmentID(workspace, spec.Name)
	err := c.store.Update(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		if done, err := model.Replayed(tx, idempotencyKey, id); done || err != nil {
			if done {
				out, err = model.GetEnvironment(tx, workspace, spec.Name)
			}
			return err
		}
		if _, err := model.GetEnvironment(tx, workspace, spec.Name); err == nil {
			return api.Errorf(api.CodeConflict, "name",
				"environment %q already exists in workspace %q; to manage it with Terraform, import it: terraform import mlcompute_environment.<name> %s",
				spec.Name, workspace, id)
		}
		now := c.clock.Now().UTC()
		out = model.Environment{Environment: api.Environment{ID: id, Workspace: workspace, CreatedOn: now, UpdatedOn: now}}
		setDefinition(&out, spec.Python, spec.UserManaged, spec.Container)
		out.Name = spec.Name
		if err := tx.Put(store.Environments, out.Key(), out); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, id, c.clock.Now())
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("environment created", "environment", id, "content_hash", out.ContentHash)
	return &out.Environment, nil
}

// Get returns an environment or a not_found error.
func (c *Controller) Get(_ context.Context, workspace, name string) (*api.Environment, error) {
	var out model.Environment
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		out, err = model.GetEnvironment(tx, workspace, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out.Environment, nil
}

// List returns a workspace's environments, by name.
func (c *Controller) List(_ context.Context, workspace string) ([]api.Environment, error) {
	var out []api.Environment
	err := c.store.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		all, err := store.List[model.Environment](tx, store.Environments, workspace+"/")
		for _, e := range all {
			out = append(out, e.Environment)
		}
		return err
	})
	return out, err
}

// Update replaces an environment's definition: its content hash follows. Jobs already
// submitted keep the definition they were submitted with.
func (c *Controller) Update(_ context.Context, workspace, name string, upd api.EnvironmentUpdate) (*api.Environment, error) {
	if err := validation.EnvironmentDefinition(upd.Python, upd.UserManaged, upd.Container); err != nil {
		return nil, err
	}
	if err := c.checkUploaded(upd.Container); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out model.Environment
	var old string
	err := c.store.Update(func(tx *store.Tx) error {
		var err error
		if out, err = model.GetEnvironment(tx, workspace, name); err != nil {
			return err
		}
		old = out.ContentHash
		if upd.Container != nil {
			if err := c.refuseWhereDeployed(tx, out, environment.Normalise(nil, nil, upd.Container)); err != nil {
				return err
			}
		}
		setDefinition(&out, upd.Python, upd.UserManaged, upd.Container)
		if out.ContentHash != old {
			out.UpdatedOn = c.clock.Now().UTC()
		}
		return tx.Put(store.Environments, out.Key(), out)
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("environment updated", "environment", out.ID, "content_hash", out.ContentHash, "previous_hash", old)
	if out.ContentHash != old && c.onChange != nil {
		c.onChange(workspace, name)
	}
	if out.ContentHash != old {
		go c.Collect()
	}
	return &out.Environment, nil
}

// Delete deletes an environment's record; builds on nodes stay in their caches. Deleting a
// missing environment is not_found.
func (c *Controller) Delete(_ context.Context, workspace, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.store.Update(func(tx *store.Tx) error {
		e, err := model.GetEnvironment(tx, workspace, name)
		if err != nil {
			return err
		}
		return tx.Delete(store.Environments, e.Key())
	})
	if err != nil {
		return err
	}
	c.log.Info("environment deleted", "environment", api.EnvironmentID(workspace, name))
	go c.Collect()
	return nil
}

// checkUploaded refuses an image archive whose upload this engine does not hold, so that
// no job learns it only when it starts.
func (c *Controller) checkUploaded(ct *api.ContainerEnvironment) error {
	if ct == nil || ct.ImageArchive == "" || c.snapshots == nil {
		return nil
	}
	dir, err := c.snapshots.Path(ct.ImageSnapshot)
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, api.ImageArchiveFile))
	}
	if err != nil {
		return api.Errorf(api.CodeInvalid, "container.image_archive",
			"container.image_archive %q: this engine holds no upload of it (snapshot %s with %s): %v; apply again to upload it",
			ct.ImageArchive, ct.ImageSnapshot, api.ImageArchiveFile, err)
	}
	return nil
}

// setDefinition stores the definition as given (so Terraform reads back what it wrote) and
// the content hash of its normalised form.
// The only default, python.python (and container.python.python), is filled in, so every
// reader sees the interpreter used.
func setDefinition(e *model.Environment, py *api.PythonEnvironment, um *api.UserManagedEnvironment, c *api.ContainerEnvironment) {
	py = withDefaultPython(py)
	if c != nil {
		withPython := *c
		withPython.Python = withDefaultPython(c.Python)
		c = &withPython
	}
	e.Python, e.UserManaged, e.Container = py, um, c
	e.ContentHash = environment.ContentHash(environment.Normalise(py, um, c))
}

// refuseWhereDeployed refuses, saying why, to make env the container environment def
// while an endpoint deployment whose instances could not run it (NoContainerRuntime of its
// instance type) runs in it: the rollout the update would start could never finish.
func (c *Controller) refuseWhereDeployed(tx *store.Tx, env model.Environment, def environment.Definition) error {
	if c.noRuntime == nil {
		return nil
	}
	eps, err := store.List[model.Endpoint](tx, store.Endpoints, env.Workspace+"/")
	if err != nil {
		return err
	}
	for _, ep := range eps {
		for _, dn := range slices.Sorted(maps.Keys(ep.Deployments)) {
			dep := ep.Deployments[dn]
			if dep.Spec.EnvironmentID != env.ID {
				continue
			}
			if cannotRun := environment.CannotRun(env.Name, def, c.noRuntime(dep.Spec.InstanceType)); cannotRun != nil {
				return api.Errorf(api.CodeInvalid, "container",
					"environment %q runs deployment %q of endpoint %q, and %v; give the deployment another environment first, or make a new container environment",
					env.Name, dn, ep.Name, cannotRun)
			}
		}
	}
	return nil
}

func withDefaultPython(py *api.PythonEnvironment) *api.PythonEnvironment {
	if py != nil && py.Python == "" {
		withDefault := *py
		withDefault.Python = api.DefaultPython
		return &withDefault
	}
	return py
}

// Collect removes the builds of this machine's cache that nothing uses any more
// (rules/environment.Garbage): after an environment changed or went, after a job ended,
// and when the engine starts. One pass runs at a time; a call during a pass makes it run
// once more. Builds on attached machines and Slurm nodes are not collected (see the
// environment docs).
func (c *Controller) Collect() {
	if c.cacheDir == "" {
		return
	}
	c.collectAgain.Store(true)
	for c.collectAgain.Load() {
		if !c.collecting.TryLock() {
			return // the running pass sees collectAgain
		}
		c.collectAgain.Store(false)
		c.collect()
		c.collecting.Unlock()
	}
}

func (c *Controller) collect() {
	cached, err := envprep.Cached(c.cacheDir)
	if err != nil {
		c.log.Error("listing the environment cache failed", "cache", c.cacheDir, "error", err)
		return
	}
	inUse, err := c.hashesInUse()
	if err != nil {
		c.log.Error("reading which environments are in use failed", "error", err)
		return
	}
	c.collectImages(inUse)
	for _, name := range environment.Garbage(cached, inUse) {
		removed, err := envprep.Remove(c.cacheDir, name, func() bool {
			now, err := c.hashesInUse()
			return err == nil && len(environment.Garbage([]string{name}, now)) == 1
		})
		switch {
		case err != nil:
			c.log.Error("removing an unused environment build failed", "build", name, "error", err)
		case removed:
			c.log.Info("unused environment build removed", "build", name)
		default:
			c.log.Debug("environment build in use again; kept", "build", name)
		}
	}
}

// collectImages removes the environment images imported on this machine that no hash in
// use names (rules/environment.UnusedImages), checking again just before each removal. A
// task that needs one again imports it again from its archive, or pulls it.
func (c *Controller) collectImages(inUse []string) {
	if c.containerd == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := containerrt.Open(ctx, c.containerd, "")
	if err != nil {
		c.log.Warn("collecting unused environment images: no containerd", "error", err)
		return
	}
	defer rt.Close()
	imported, err := rt.ImportedHashes(ctx)
	if err != nil {
		c.log.Error("listing the environment images failed", "error", err)
		return
	}
	for _, hash := range environment.UnusedImages(imported, inUse) {
		if now, err := c.hashesInUse(); err != nil || len(environment.UnusedImages([]string{hash}, now)) == 0 {
			continue
		}
		if err := rt.RemoveImage(ctx, hash); err != nil {
			c.log.Error("removing an unused environment image failed", "content_hash", hash, "error", err)
			continue
		}
		c.log.Info("unused environment image removed", "content_hash", hash)
	}
}

// hashesInUse are the content hashes something needs: every environment's current one,
// the ones unfinished jobs were submitted with, and the ones endpoint deployments and their
// instances (an older generation still serving included) run in.
func (c *Controller) hashesInUse() ([]string, error) {
	var out []string
	err := c.store.View(func(tx *store.Tx) error {
		envs, err := store.List[model.Environment](tx, store.Environments, "")
		if err != nil {
			return err
		}
		for _, e := range envs {
			out = append(out, e.ContentHash)
		}
		for _, k := range tx.Keys(store.ActiveJobs, "") {
			var key string
			if ok, err := tx.Get(store.ActiveJobs, k, &key); err != nil || !ok {
				return err
			}
			var j model.Job
			if ok, err := tx.Get(store.Jobs, key, &j); err != nil {
				return err
			} else if ok && j.EnvDef != nil {
				out = append(out, j.EnvDef.Hash)
			}
		}
		eps, err := store.List[model.Endpoint](tx, store.Endpoints, "")
		if err != nil {
			return err
		}
		for _, ep := range eps {
			for _, d := range ep.Deployments {
				if d.Env != nil {
					out = append(out, d.Env.Hash)
				}
			}
			for _, d := range ep.Retiring {
				if d.Env != nil {
					out = append(out, d.Env.Hash)
				}
			}
			for _, in := range ep.Instances {
				if in.Process.Env != nil {
					out = append(out, in.Process.Env.Hash)
				}
			}
		}
		return nil
	})
	return out, err
}
