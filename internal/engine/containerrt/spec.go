// Package containerrt runs a task's process in a container image through containerd's Go
// client (DESIGN 5 "Containers"): an image archive is imported and unpacked once per
// machine, under a name keyed by the environment's content hash; a task's container shares
// the host's network (so PORT and MASTER_ADDR mean what they mean outside), sees the host
// paths it is given at the same paths, and is labelled with the engine's ID and the task's
// key, so that the engine can find and remove every container it does not record after a
// crash or a failed start (Sweep).
//
// RunTask is what a node agent's task process (its binary's container-run) does; the
// local driver runs SweepEnded when it starts.
package containerrt

import (
	"errors"
	"io"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
)

const (
	// Namespace is the containerd namespace the engine's images and containers live in.
	Namespace = "mlcompute"
	// KubernetesNamespace is the containerd namespace of a Kubernetes node's kubelet (the
	// CRI plugin's): an image there is one its pods can run.
	KubernetesNamespace = "k8s.io"
	// LabelEngine holds the ID of the engine that made a container.
	LabelEngine = "mlcompute.engine"
	// LabelTask holds the key of the task a container runs.
	LabelTask = "mlcompute.task"
)

// DefaultAddress is containerd's own default socket: where a machine's containerd is looked
// for when nothing names another (AddressEnv).
const DefaultAddress = "/run/containerd/containerd.sock"

// AddressEnv names a machine's containerd socket when it is not DefaultAddress: read by the
// engine the provider and the CLI start (mlcompute serve takes --containerd-address
// instead), and by a task's container-run on a machine the engine reaches over SSH or
// through Slurm, in the environment the machine gives the task.
const AddressEnv = "MLCOMPUTE_CONTAINERD_ADDRESS"

// MachineAddress is the containerd socket of the machine a process runs on: AddressEnv's,
// else DefaultAddress.
func MachineAddress(getenv func(string) string) string {
	if a := getenv(AddressEnv); a != "" {
		return a
	}
	return DefaultAddress
}

// ErrNoRuntime wraps a containerd that cannot be reached.
var ErrNoRuntime = errors.New("no container runtime")

// ImageName is the name an environment's image is imported under: one per content hash.
func ImageName(hash string) string {
	return environment.ArchiveImage(hash)
}

// RunSpec is one task's process in a container.
type RunSpec struct {
	// ID is the container's ID, unique on the machine.
	ID string
	// Task is the key of the task it runs, its mlcompute.task label (ID when empty).
	Task string
	// Image is the image's name in containerd: ImageName(hash) after Import, or a
	// reference after Pull.
	Image string
	Args  []string
	Env   []string
	Cwd   string
	// Binds are host paths mounted read-write at the same path in the container: the
	// node's working directory, the task's code, inputs and outputs.
	Binds []string
	// Devices are device nodes the container may use (a node's GPUs).
	Devices []string
	// Stdout and Stderr receive the process's output, each from its own goroutine.
	Stdout, Stderr io.Writer
}
