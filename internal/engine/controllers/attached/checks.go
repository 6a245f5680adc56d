package attached

import (
	"context"
	"net"
	"strconv"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// The checks an attach or an update makes against the machine or the cluster it names.
// The composition root makes them with the ssh and Kubernetes drivers (package
// attachcheck); engine tests give fakes. The controller imports no concrete driver.

// MachineChecks are the calls an attach makes to a machine.
type MachineChecks interface {
	// Probe connects to the machine (pinning or verifying its host key), checks that it
	// runs Linux and reads its size. A failure one setting is to blame for is a
	// *SettingError.
	Probe(ctx context.Context, a model.Attached) (MachineInfo, error)
}

// MachineInfo is what an attach reads of a machine.
type MachineInfo struct {
	HostKeyFingerprint string
	VCPUs              int64
	MemoryGB           float64
}

// KubeChecks are the calls an attach makes to a Kubernetes cluster, given as stored.
type KubeChecks interface {
	// Access checks that the cluster answers, the namespace exists and the credentials may
	// run job pods there; a failure is a *SettingError naming the setting to fix.
	Access(ctx context.Context, k model.KubeCluster) error
	// Capacity sums the allocatable of the nodes the instance types can use.
	Capacity(ctx context.Context, k model.KubeCluster, types []driver.PodShape) (Capacity, error)
	// InstanceType fails when no node can run a pod of the instance type; a cluster that
	// cannot be reached is a *SettingError.
	InstanceType(ctx context.Context, k model.KubeCluster, shape driver.PodShape) error
}

// Capacity is what a cluster's nodes give its instance types.
type Capacity struct {
	// Listed is false when the credentials may not list nodes: the capacity is unknown
	// (and reported as zero).
	Listed   bool
	Nodes    int
	VCPUs    int64
	MemoryGB float64
}

// SettingError is a failed check that one setting of the compute is to blame for: Setting
// is its attribute path ("virtual_machine.ssh_port", "kubernetes.namespace").
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return e.Err.Error() }

func (e *SettingError) Unwrap() error { return e.Err }

// address is how messages and logs name a machine: user@host:port, never a secret.
func address(a model.Attached) string {
	return a.Username + "@" + net.JoinHostPort(a.Address, strconv.FormatInt(a.Port, 10))
}
