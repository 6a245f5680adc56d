package api

import "time"

// Compute types, as Azure Machine Learning names them.
const (
	TypeComputeCluster  = "ComputeCluster"
	TypeComputeInstance = "ComputeInstance"
	TypeAttached        = "VirtualMachine"
)

// VM priorities of a cluster.
const (
	PriorityDedicated   = "Dedicated"
	PriorityLowPriority = "LowPriority"
)

// Allocation states of a cluster.
const (
	AllocationSteady   = "Steady"
	AllocationResizing = "Resizing"
)

// Node states. A node is preparing while its driver brings it up (or while it waits for
// capacity), idle or running once up, leaving while it drains or is released, unusable when
// it died, and preempted when a Dedicated node took its capacity.
const (
	NodeIdle      = "idle"
	NodeRunning   = "running"
	NodePreparing = "preparing"
	NodeLeaving   = "leaving"
	NodeUnusable  = "unusable"
	NodePreempted = "preempted"
)

// ScaleSettings bound a cluster's node count.
type ScaleSettings struct {
	MinNodeCount int64 `json:"min_node_count"`
	MaxNodeCount int64 `json:"max_node_count"`
	// ScaleDownNodesAfterIdleDuration is an ISO 8601 duration, PT0S to P7D.
	ScaleDownNodesAfterIdleDuration string `json:"scale_down_nodes_after_idle_duration"`
}

// DefaultScaleDownAfterIdle is scale_down_nodes_after_idle_duration when none is given.
const DefaultScaleDownAfterIdle = "PT120S"

// WithDefaults fills what the user left out; it is the one place the defaults are set.
func (s ScaleSettings) WithDefaults() ScaleSettings {
	if s.ScaleDownNodesAfterIdleDuration == "" {
		s.ScaleDownNodesAfterIdleDuration = DefaultScaleDownAfterIdle
	}
	return s
}

// ComputeSpec is what a user declares for a compute. Type selects the kind; fields of other
// kinds stay empty.
type ComputeSpec struct {
	Name          string            `json:"name"`
	Type          string            `json:"type"`
	VMSize        string            `json:"vm_size,omitempty"`
	VMPriority    string            `json:"vm_priority,omitempty"`
	Description   string            `json:"description,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	ScaleSettings *ScaleSettings    `json:"scale_settings,omitempty"`
	// Instance holds a compute instance's settings.
	Instance *InstanceSettings `json:"instance,omitempty"`
	// VirtualMachine is the machine an attached compute (TypeAttached) stands for.
	VirtualMachine *VirtualMachine `json:"virtual_machine,omitempty"`
	// Kubernetes is the cluster an attached Kubernetes compute (TypeKubernetes) stands for.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
}

// ComputeUpdate replaces a compute's mutable fields.
type ComputeUpdate struct {
	Description   string            `json:"description,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	ScaleSettings *ScaleSettings    `json:"scale_settings,omitempty"`
	// VMSize resizes a compute instance (stop, resize, start again if it was running);
	// empty keeps the size.
	VMSize   string            `json:"vm_size,omitempty"`
	Instance *InstanceSettings `json:"instance,omitempty"`
	// VirtualMachine rotates an attached machine's password or private key; its other
	// fields must stay as they are.
	VirtualMachine *VirtualMachine `json:"virtual_machine,omitempty"`
	// Kubernetes replaces an attached cluster's settings; the engine checks the cluster
	// again when the kubeconfig, context or namespace change.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
}

// NodeStateCounts counts a cluster's nodes by state.
type NodeStateCounts struct {
	Idle      int64 `json:"idle"`
	Running   int64 `json:"running"`
	Preparing int64 `json:"preparing"`
	Leaving   int64 `json:"leaving"`
	Unusable  int64 `json:"unusable"`
	Preempted int64 `json:"preempted"`
}

// Node is one node of a compute.
type Node struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// JobID is the job the node runs, when running.
	JobID     string    `json:"job_id,omitempty"`
	CreatedOn time.Time `json:"created_on"`
	// IdleSince is when the node last became idle (zero when it is not idle).
	IdleSince time.Time `json:"idle_since,omitempty"`
	// Reason says why a preparing node is not usable yet: the vCPUs, GPUs or machine it
	// waits for, or its driver's words (a cluster manager's pending reason, such as
	// "Resources").
	Reason string `json:"reason,omitempty"`
	// GPUs are the machine's GPUs the node holds (a local node of a GPU size).
	GPUs []string `json:"gpus,omitempty"`
}

// Compute is a compute as the engine holds it, with its runtime state.
type Compute struct {
	ID          string            `json:"id"`
	Workspace   string            `json:"workspace"`
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	VMSize      string            `json:"vm_size,omitempty"`
	VMPriority  string            `json:"vm_priority,omitempty"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	CreatedOn   time.Time         `json:"created_on"`

	ScaleSettings    *ScaleSettings  `json:"scale_settings,omitempty"`
	CurrentNodeCount int64           `json:"current_node_count"`
	TargetNodeCount  int64           `json:"target_node_count"`
	AllocationState  string          `json:"allocation_state,omitempty"`
	NodeStateCounts  NodeStateCounts `json:"node_state_counts"`
	// State is the compute's overall state: for clusters Succeeded, for instances one of
	// the instance states.
	State string `json:"state"`
	Nodes []Node `json:"nodes"`

	// Instance, LastOperation and Error describe a compute instance.
	Instance      *InstanceSettings `json:"instance,omitempty"`
	LastOperation *Operation        `json:"last_operation,omitempty"`
	// Error explains a SetupFailed instance: the script that failed and its last lines.
	Error string `json:"error,omitempty"`
	// VirtualMachine describes an attached machine, without its password or private key.
	VirtualMachine *VirtualMachine `json:"virtual_machine,omitempty"`
	// Kubernetes describes an attached Kubernetes cluster, without its kubeconfig.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	// Errors are the compute's recent failures to get or keep nodes, newest first (at most
	// MaxComputeErrors); they clear once a node starts again.
	Errors []ComputeError `json:"errors,omitempty"`
}

// ComputeError is one failure of a compute, as Azure shows a compute's errors.
type ComputeError struct {
	Time    time.Time `json:"time"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
}

// MaxComputeErrors bounds the errors a compute keeps.
const MaxComputeErrors = 10

// Error codes of ComputeError.
const (
	// ErrorNoCapacity: the node driver had no room for a node (it retries).
	ErrorNoCapacity = "NoCapacity"
	// ErrorNodeStartFailed: the node driver refused the node (a setting to fix).
	ErrorNodeStartFailed = "NodeStartFailed"
	// ErrorNodeStartRetrying: a node failed to start for a reason that may pass; it retries.
	ErrorNodeStartRetrying = "NodeStartRetrying"
	// ErrorNodeLost: a node died or its allocation ended by itself; it is replaced.
	ErrorNodeLost = "NodeLost"
)

// ComputeList is the body of GET /v1/workspaces/{ws}/computes.
type ComputeList struct {
	Computes []Compute `json:"computes"`
}

// ComputeID is the ID of a compute.
func ComputeID(workspace, name string) string {
	return ID{Workspace: workspace, Collection: CollectionComputes, Name: name}.String()
}
