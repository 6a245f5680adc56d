package model

import (
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Compute is a compute as stored. Runtime state (nodes, counts) lives in node records
// and is folded in when the compute is read.
type Compute struct {
	Workspace     string             `json:"workspace"`
	Name          string             `json:"name"`
	Type          string             `json:"type"`
	VMSize        string             `json:"vm_size"`
	VMPriority    string             `json:"vm_priority,omitempty"`
	Description   string             `json:"description,omitempty"`
	Tags          map[string]string  `json:"tags,omitempty"`
	ScaleSettings *api.ScaleSettings `json:"scale_settings,omitempty"`
	CreatedOn     time.Time          `json:"created_on"`
	// Deleting is set (and committed) before any node is released, so a crash in the
	// middle of a delete resumes it instead of leaking nodes.
	Deleting bool `json:"deleting,omitempty"`
	// Serverless marks a compute made for one job alone; it goes with the job.
	Serverless bool   `json:"serverless,omitempty"`
	ForJob     string `json:"for_job,omitempty"`
	// Instance is set for compute instances.
	Instance *Instance `json:"instance,omitempty"`
	// Durations are the settings' durations, parsed once (ParseDurations).
	Durations Durations `json:"durations"`
	// Errors are the recent failures to get or keep nodes, newest first (bounded).
	Errors []api.ComputeError `json:"errors,omitempty"`
	// Attached is set for attached machines (controllers/attached).
	Attached *Attached `json:"attached,omitempty"`
	// Kubernetes is set for attached Kubernetes clusters (kubernetes.go); they hold no
	// nodes themselves.
	Kubernetes *KubeCluster `json:"kubernetes,omitempty"`
	// KubeJob is set on the record made for one job on an attached Kubernetes cluster: its
	// nodes are pods there.
	KubeJob *KubeJob `json:"kube_job,omitempty"`
}

func (c Compute) Key() string { return c.Workspace + "/" + c.Name }

// idleAfter is the cluster's scale-down delay; the spec was validated on the way in.
func (c Compute) IdleAfter() time.Duration { return c.Durations.ScaleDownAfter }

// Durations are a compute's ISO 8601 settings parsed once, where they come in (ParseDurations
// at create, update and engine start), so no pass parses a string again.
type Durations struct {
	// ScaleDownAfter is a cluster's scale_down_nodes_after_idle_duration.
	ScaleDownAfter time.Duration `json:"scale_down_after,omitempty"`
	// IdleShutdownAfter is an instance's idle_time_before_shutdown; 0 means never.
	IdleShutdownAfter time.Duration `json:"idle_shutdown_after,omitempty"`
}

// ParseDurations fills Durations from the settings, which were validated on the way in
// (an unparsable one, from a damaged record, counts as 0).
func (c *Compute) ParseDurations() {
	var d Durations
	if c.ScaleSettings != nil {
		d.ScaleDownAfter, _ = validation.Duration("", c.ScaleSettings.WithDefaults().ScaleDownNodesAfterIdleDuration, 0, validation.MaxScaleDownAfterIdle)
	}
	if c.Instance != nil {
		d.IdleShutdownAfter, _ = validation.IdleTimeBeforeShutdown(c.Instance.Settings.IdleTimeBeforeShutdown, 0)
	}
	c.Durations = d
}

// resourceType is the Terraform resource that manages this kind of compute.
func (c Compute) ResourceType() string {
	if c.Instance != nil {
		return "mlcompute_compute_instance"
	}
	if c.Attached != nil || c.Kubernetes != nil {
		return "mlcompute_attached_compute"
	}
	return "mlcompute_compute_cluster"
}

// quotaField is the input that sets how many vCPUs the compute may use: a cluster's
// max_node_count, an instance's size.
func (c Compute) QuotaField() string {
	if c.Instance != nil {
		return "vm_size"
	}
	return "scale_settings.max_node_count"
}

func (c Compute) MaxNodes() int64 {
	if c.ScaleSettings == nil {
		return 1
	}
	return c.ScaleSettings.MaxNodeCount
}

func GetWorkspace(tx *store.Tx, name string) (*api.Workspace, error) {
	var ws api.Workspace
	ok, err := tx.Get(store.Workspaces, name, &ws)
	if err == nil && !ok {
		return nil, NotFoundWorkspace(name)
	}
	return &ws, err
}

func GetCompute(tx *store.Tx, workspace, name string) (Compute, error) {
	var rec Compute
	ok, err := tx.Get(store.Computes, workspace+"/"+name, &rec)
	if err == nil && !ok {
		return rec, NotFoundCompute(workspace, name)
	}
	return rec, err
}

func NotFoundCompute(workspace, name string) error {
	return api.Errorf(api.CodeNotFound, "", "compute %q not found in workspace %q", name, workspace)
}

// Replayed reports whether a create with this idempotency key already happened (for id).
func Replayed(tx *store.Tx, key, id string) (bool, error) {
	if key == "" {
		return false, nil
	}
	var rec Idempotency
	ok, err := tx.Get(store.Idempotency, key, &rec)
	if err != nil || !ok {
		return false, err
	}
	if rec.ID != id {
		return false, api.Errorf(api.CodeConflict, "", "idempotency key %q was used for %s", key, rec.ID)
	}
	return true, nil
}

// Remember records that the create with this key made id, at now.
func Remember(tx *store.Tx, key, id string, now time.Time) error {
	if key == "" {
		return nil
	}
	return tx.Put(store.Idempotency, key, Idempotency{ID: id, At: now.UTC()})
}

// IdempotencyTTL is how long a create's key is remembered. A client retries a create for
// at most its operation's timeout (the provider's longest default is under an hour), so a
// day is far beyond any retry, and the records do not pile up for the store's lifetime.
const IdempotencyTTL = 24 * time.Hour

// PruneIdempotency deletes the keys remembered longer than IdempotencyTTL before now and
// returns how many went.
func PruneIdempotency(tx *store.Tx, now time.Time) (int, error) {
	pruned := 0
	for _, key := range tx.Keys(store.Idempotency, "") {
		var rec Idempotency
		if ok, err := tx.Get(store.Idempotency, key, &rec); err != nil || !ok {
			return pruned, err
		}
		if now.Sub(rec.At) <= IdempotencyTTL {
			continue
		}
		if err := tx.Delete(store.Idempotency, key); err != nil {
			return pruned, err
		}
		pruned++
	}
	return pruned, nil
}

// AttachedNodePrefix starts the keys of attached machines' nodes.
const AttachedNodePrefix = "vm-"

// Attached is the attached part of a compute record.
type Attached struct {
	Address            string  `json:"address"`
	Port               int64   `json:"port"`
	Username           string  `json:"username"`
	Password           string  `json:"password,omitempty"`
	PrivateKey         string  `json:"private_key,omitempty"`
	HostKeyFingerprint string  `json:"host_key_fingerprint"`
	VCPUs              int64   `json:"vcpus"`
	MemoryGB           float64 `json:"memory_gb"`
}

// api is what a read shows: everything but the secrets.
func (a Attached) API() *api.VirtualMachine {
	return &api.VirtualMachine{
		Address: a.Address, SSHPort: a.Port, Username: a.Username,
		HostKeyFingerprint: a.HostKeyFingerprint, VCPUs: a.VCPUs, MemoryGB: a.MemoryGB,
	}
}

// nodeIDPrefix is how the IDs of a compute's nodes start.
func (c Compute) NodeIDPrefix() string {
	if c.KubeJob != nil {
		return strings.TrimSuffix(KubeNodePrefix, "-")
	}
	if c.Attached != nil {
		return strings.TrimSuffix(AttachedNodePrefix, "-")
	}
	return "node"
}

// AddError records a failure, newest first, keeping at most api.MaxComputeErrors.
func (c *Compute) AddError(e api.ComputeError) {
	c.Errors = append([]api.ComputeError{e}, c.Errors...)
	if len(c.Errors) > api.MaxComputeErrors {
		c.Errors = c.Errors[:api.MaxComputeErrors]
	}
}
