// Package attached is the attached machines' controller. An attached compute is a machine
// the user owns, reached over SSH. It is a compute of exactly one node that never scales:
// the node stands for the machine, so its passes are a cluster's with min = max = 1 (package
// clusters), and jobs reach it through the usual queue. Its node keys start with
// model.AttachedNodePrefix, which is how the engine's routing driver sends them to the ssh
// driver while every other node stays on the operator's driver. The machine's credentials
// are kept in the store (a 0600 file) and never returned.
package attached

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Core is what the controller uses of the compute core (package computes).
type Core interface {
	computes.Records
	computes.Transactions
	computes.NodeLifecycle
	computes.Runtime
}

// Controller attaches and updates machines and Kubernetes clusters on the shared compute
// core.
type Controller struct {
	core Core
	log  hclog.Logger
	cfg  Config
}

// Config is what the controller is built with besides the compute core.
type Config struct {
	// DefaultKubeImage is the image of job pods on an attached cluster whose
	// kubernetes.image is not set, and DefaultKubeImageFrom says where it comes from in
	// errors when it is empty (the engine's MLCOMPUTE_KUBE_IMAGE).
	DefaultKubeImage, DefaultKubeImageFrom string
	// KubeJobs says the engine has a node driver for attached clusters' pods (the
	// composition root's driver/route); without one, jobs there are refused at submit.
	KubeJobs bool
	// Machines and Clusters are the checks an attach makes (checks.go); both are needed.
	Machines MachineChecks
	Clusters KubeChecks
}

// New builds the controller.
func New(core Core, cfg Config) *Controller {
	return &Controller{core: core, log: core.Logger().Named("attached"), cfg: cfg}
}

// attachProbeTimeout bounds the connection and checks made when a machine is attached.
const attachProbeTimeout = 30 * time.Second

// AttachedMachine is the stored machine of an attached machine's node (driver/route's
// Lookups).
func (c *Controller) AttachedMachine(_ context.Context, nodeKey string) (model.Attached, error) {
	var a model.Attached
	err := c.core.View(func(tx *store.Tx) error {
		n, ok := c.core.NodeByID(tx, nodeKey)
		if !ok {
			return driver.ErrNotFound
		}
		var rec model.Compute
		if ok, err := tx.Get(store.Computes, n.Compute, &rec); err != nil {
			return err
		} else if !ok || rec.Attached == nil {
			return driver.ErrNotFound
		}
		a = *rec.Attached
		return nil
	})
	return a, err
}

// AttachedTasks is the task of the job the store records as running on an attached
// machine's node (driver/route's Lookups), so a job that ended while the engine was down
// (or could not reach the machine at its start) learns its exit once the machine answers.
// A job still preparing is left out: recovery starts it again, and its task may not exist
// yet.
func (c *Controller) AttachedTasks(_ context.Context, nodeKey string) ([]string, error) {
	var keys []string
	err := c.core.View(func(tx *store.Tx) error {
		n, ok := c.core.NodeByID(tx, nodeKey)
		if !ok {
			return driver.ErrNotFound
		}
		if n.Task == "" || n.JobID == "" {
			return nil
		}
		if j, ok := model.GetJob(tx, model.WorkspaceOf(n.Compute), n.JobID); ok && j.Status == api.JobRunning {
			keys = append(keys, n.Task)
		}
		return nil
	})
	return keys, err
}

// Create attaches a machine: it connects, pins or verifies the host key, checks
// the machine runs Linux and reads its size, all before anything is recorded, so a
// failure leaves nothing behind and names the setting to fix.
func (c *Controller) Create(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	if spec.Kubernetes != nil && spec.VirtualMachine == nil {
		return c.CreateKubernetes(ctx, workspace, spec, idempotencyKey)
	}
	if err := validation.AttachedCompute(spec); err != nil {
		return nil, err
	}
	vm := *spec.VirtualMachine
	if vm.SSHPort == 0 {
		vm.SSHPort = api.DefaultSSHPort
	}
	key := workspace + "/" + spec.Name
	replay, err := c.checkNew(workspace, spec.Name, idempotencyKey)
	if err != nil {
		return nil, err
	}
	if replay {
		return c.core.GetCompute(ctx, workspace, spec.Name)
	}

	a := model.Attached{
		Address: vm.Address, Port: vm.SSHPort, Username: vm.Username,
		Password: vm.Password, PrivateKey: vm.PrivateKey, HostKeyFingerprint: vm.HostKeyFingerprint,
	}
	info, err := c.probeAttached(ctx, a)
	if err != nil {
		return nil, err
	}
	a.HostKeyFingerprint, a.VCPUs, a.MemoryGB = info.HostKeyFingerprint, info.VCPUs, info.MemoryGB
	rec := model.Compute{
		Workspace: workspace, Name: spec.Name, Type: api.TypeAttached, Description: spec.Description, Tags: spec.Tags,
		CreatedOn: c.core.Clock().Now().UTC(), Attached: &a,
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 1, MaxNodeCount: 1, ScaleDownNodesAfterIdleDuration: "PT0S"},
	}

	out, err := c.core.Insert(ctx, rec, idempotencyKey, "")
	if err == nil {
		c.log.Info("machine attached", "compute", key, "address", address(a), "host_key", a.HostKeyFingerprint, "vcpus", a.VCPUs, "memory_gb", a.MemoryGB)
	}
	return out, err
}

// checkNew makes the cheap checks of an attach first, so that a replayed create or a
// taken name never dials the machine or the cluster. It reports a replay.
func (c *Controller) checkNew(workspace, name, idempotencyKey string) (bool, error) {
	id := api.ComputeID(workspace, name)
	var replay bool
	err := c.core.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		done, err := model.Replayed(tx, idempotencyKey, id)
		if done || err != nil {
			replay = done
			return err
		}
		var existing model.Compute
		if ok, err := tx.Get(store.Computes, workspace+"/"+name, &existing); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.CodeConflict, "name", "compute %q already exists in workspace %q; to manage it with Terraform, import it: terraform import %s.<name> %s", name, workspace, existing.ResourceType(), id)
		}
		return nil
	})
	return replay, err
}

// probeAttached connects to the machine and reads its size, turning every way that can
// fail into an error on the setting to fix.
func (c *Controller) probeAttached(ctx context.Context, a model.Attached) (MachineInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, attachProbeTimeout)
	defer cancel()
	info, err := c.cfg.Machines.Probe(ctx, a)
	var se *SettingError
	switch {
	case err == nil:
		return info, nil
	case errors.As(err, &se):
		return info, api.Errorf(api.CodeInvalid, se.Setting, "cannot attach the machine: %v", err)
	case errors.Is(err, context.Canceled):
		return info, api.Errorf(api.CodeUnavailable, "", "attaching %s was cancelled", address(a))
	}
	return info, api.Errorf(api.CodeInvalid, "virtual_machine.address", "attaching %s: %v", address(a), err)
}

// Update updates an attached compute in place: its description and tags, and a
// rotated password or private key, which is checked against the machine (host key as
// pinned) before it replaces the old one. Where the machine is, the login and the pinned
// host key identify the machine and do not change.
func (c *Controller) Update(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	var rec model.Compute
	if err := c.core.View(func(tx *store.Tx) (err error) { rec, err = model.GetCompute(tx, workspace, name); return err }); err != nil {
		return nil, err
	}
	switch {
	case rec.Deleting:
		return nil, api.Errorf(api.CodeConflict, "", "compute %q is being detached", name)
	case upd.ScaleSettings != nil:
		return nil, api.Errorf(api.CodeInvalid, "scale_settings", "attached compute %q never scales: it is one machine", name)
	case upd.VMSize != "" || upd.Instance != nil:
		return nil, api.Errorf(api.CodeInvalid, "vm_size", "attached compute %q has no vm_size or instance settings", name)
	case rec.Kubernetes != nil && upd.VirtualMachine != nil:
		return nil, api.Errorf(api.CodeInvalid, "virtual_machine", "attached compute %q is a Kubernetes cluster; attaching a machine instead replaces the compute", name)
	case rec.Kubernetes != nil:
		return c.updateKubernetes(ctx, rec, upd)
	case upd.Kubernetes != nil:
		return nil, api.Errorf(api.CodeInvalid, "kubernetes", "attached compute %q is a machine; attaching a Kubernetes cluster instead replaces the compute", name)
	}
	next := *rec.Attached
	if vm := upd.VirtualMachine; vm != nil {
		port := vm.SSHPort
		if port == 0 {
			port = api.DefaultSSHPort
		}
		for _, f := range []struct {
			field     string
			got, want any
			changed   bool
		}{
			{"virtual_machine.address", vm.Address, next.Address, vm.Address != "" && vm.Address != next.Address},
			{"virtual_machine.ssh_port", port, next.Port, port != next.Port},
			{"virtual_machine.username", vm.Username, next.Username, vm.Username != "" && vm.Username != next.Username},
			{"virtual_machine.host_key_fingerprint", vm.HostKeyFingerprint, next.HostKeyFingerprint, vm.HostKeyFingerprint != "" && vm.HostKeyFingerprint != next.HostKeyFingerprint},
		} {
			if f.changed {
				return nil, api.Errorf(api.CodeInvalid, f.field, "%s of attached compute %q cannot change in place (from %v to %v): it names another machine or login; replace the compute", f.field, name, f.want, f.got)
			}
		}
		if vm.Password != next.Password || vm.PrivateKey != next.PrivateKey {
			if err := validation.Credentials(vm.Password, vm.PrivateKey); err != nil {
				return nil, err
			}
			next.Password, next.PrivateKey = vm.Password, vm.PrivateKey
			// vcpus and memory_gb stay as read at attach time: they describe the machine,
			// which a new credential does not change.
			if _, err := c.probeAttached(ctx, next); err != nil {
				return nil, err
			}
		}
	}
	out, err := c.core.Modify(ctx, workspace, name, func(_ *api.Workspace, cur *model.Compute) error {
		cur.Description, cur.Tags, cur.Attached = upd.Description, upd.Tags, &next
		return nil
	})
	return out, err
}
