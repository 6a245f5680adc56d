// Package attachcheck is what an attach checks against a machine or a Kubernetes cluster,
// made with the concrete drivers (an ssh probe; the Kubernetes access, capacity and
// instance type checks) and reaching a stored machine or cluster as the routes do. The
// composition root gives it to controllers/attached, which imports no concrete driver.
package attachcheck

import (
	"context"
	"errors"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/attached"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/route"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// Checks makes an attach's checks with the ssh and Kubernetes drivers, reaching a stored
// machine or cluster as the routes do (route.SSHTarget, route.KubeConfig), and says which
// setting a failure blames (attached.SettingError).
type Checks struct {
	// KubeImage is the image of a cluster's pods when it names none.
	KubeImage string
}

var (
	_ attached.MachineChecks = Checks{}
	_ attached.KubeChecks    = Checks{}
)

func (c Checks) Probe(ctx context.Context, a model.Attached) (attached.MachineInfo, error) {
	info, err := ssh.Probe(ctx, route.SSHTarget(a))
	if err == nil {
		return attached.MachineInfo{HostKeyFingerprint: info.HostKeyFingerprint, VCPUs: info.VCPUs, MemoryGB: info.MemoryGB}, nil
	}
	credential := "virtual_machine.password"
	if a.PrivateKey != "" {
		credential = "virtual_machine.private_key"
	}
	var setting string
	switch {
	case ssh.IsUnreachable(err), ssh.IsNotLinux(err):
		setting = "virtual_machine.address"
	case ssh.IsConnectionRefused(err):
		setting = "virtual_machine.ssh_port"
	case ssh.IsAuthFailed(err), ssh.IsInvalidTarget(err):
		setting = credential
	case ssh.IsHostKeyMismatch(err):
		setting = "virtual_machine.host_key_fingerprint"
	default:
		return attached.MachineInfo{}, err
	}
	return attached.MachineInfo{}, &attached.SettingError{Setting: setting, Err: err}
}

func (c Checks) Access(ctx context.Context, k model.KubeCluster) error {
	return KubeSetting(kubernetes.CheckAccess(ctx, route.KubeConfig(k, c.KubeImage)))
}

func (c Checks) Capacity(ctx context.Context, k model.KubeCluster, types []driver.PodShape) (attached.Capacity, error) {
	got, err := kubernetes.ReadCapacity(ctx, route.KubeConfig(k, c.KubeImage), types)
	return attached.Capacity{Listed: got.Listed, Nodes: got.Nodes, VCPUs: got.VCPUs, MemoryGB: got.MemoryGB}, KubeSetting(err)
}

func (c Checks) InstanceType(ctx context.Context, k model.KubeCluster, shape driver.PodShape) error {
	return KubeSetting(kubernetes.CheckInstanceType(ctx, route.KubeConfig(k, c.KubeImage), shape))
}

// KubeSetting marks a *kubernetes.AccessError with the attribute of the setting it blames.
func KubeSetting(err error) error {
	var ae *kubernetes.AccessError
	if errors.As(err, &ae) {
		return &attached.SettingError{Setting: "kubernetes." + ae.Setting, Err: err}
	}
	return err
}
