// Package route builds the engine's one node driver from the driver the operator chose
// (local, slurm or kubernetes) and the drivers of attached computes: an attached machine's
// nodes go to an ssh driver, the pods of jobs on attached Kubernetes clusters to their
// cluster's driver, every other node to the operator's. The composition root builds it;
// what a node key stands for comes from the store, through Lookups, which the attached
// controller answers. No controller builds or imports a concrete driver for this.
package route

import (
	"cmp"
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/mux"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// Lookups are the store look-ups the routes need. They answer with what the store records;
// how a driver reaches it (SSHTarget, KubeConfig) is decided here.
type Lookups interface {
	// AttachedMachine is the stored machine of an attached machine's node
	// (driver.ErrNotFound when the store does not record it).
	AttachedMachine(ctx context.Context, nodeKey string) (model.Attached, error)
	// AttachedTasks are the tasks the store records as running on an attached machine's
	// node, whose exits the ssh driver looks for after a restart.
	AttachedTasks(ctx context.Context, nodeKey string) ([]string, error)
	// KubeNode is the cluster of a job pod's node, as its job compute recorded it; ok is
	// false when the store records no such node.
	KubeNode(nodeKey string) (k model.KubeCluster, ok bool, err error)
	// KubeClusters are the clusters the store's job computes name: the only ones that may
	// hold the engine's pods.
	KubeClusters() ([]model.KubeCluster, error)
}

// Config is what the routes are built from.
type Config struct {
	Lookups Lookups
	// NewKubeDriver builds the driver of one attached cluster; nil leaves attached
	// clusters without jobs.
	NewKubeDriver NewKubeDriver
	// DefaultKubeImage is the image of a cluster's pods, and of its archive's import pods,
	// when the cluster names none (the engine's MLCOMPUTE_KUBE_IMAGE).
	DefaultKubeImage string
	// Containers runs tasks in container images on attached machines; nil refuses them.
	Containers *ssh.ContainerRunner
	Logger     hclog.Logger
}

// SSHTarget is how the ssh driver reaches an attached machine.
func SSHTarget(a model.Attached) ssh.Target {
	return ssh.Target{
		Address: a.Address, Port: int(a.Port), Username: a.Username,
		Password: a.Password, PrivateKeyPEM: a.PrivateKey, HostKeyFingerprint: a.HostKeyFingerprint,
	}
}

// KubeConfig is how a cluster's driver (and an attach's checks) reach a stored attached
// cluster; its images fall back to defaultImage.
func KubeConfig(k model.KubeCluster, defaultImage string) kubernetes.Config {
	cfg := kubernetes.Config{
		Kubeconfig: []byte(k.Kubeconfig), Context: k.Context, Namespace: k.Namespace, Image: cmp.Or(k.Image, defaultImage),
		StartTimeout: kubernetes.DefaultStartTimeout,
	}
	if a := k.Archive; a != nil {
		cfg.Archive = &kubernetes.ImageArchive{Path: a.Path, Hash: a.Hash, ImportImage: cmp.Or(a.ImportImage, defaultImage)}
	}
	return cfg
}

// New returns the engine's node driver: base, with the nodes of attached machines and of
// jobs on attached clusters routed by their key's prefix. The routes' drivers live until
// ctx ends.
func New(ctx context.Context, base driver.Driver, cfg Config) driver.Driver {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	target := func(ctx context.Context, nodeKey string) (ssh.Target, error) {
		a, err := cfg.Lookups.AttachedMachine(ctx, nodeKey)
		return SSHTarget(a), err
	}
	vms := ssh.NewDriver(ssh.DriverConfig{Lookup: target, Tasks: cfg.Lookups.AttachedTasks, Logger: cfg.Logger.Named("ssh"), Containers: cfg.Containers})
	pods := newKubeDrivers(ctx, cfg)
	context.AfterFunc(ctx, func() { _ = vms.Close(); _ = pods.Close() })
	return mux.New(ctx, base, mux.Route{Prefix: model.AttachedNodePrefix, Driver: vms}, mux.Route{Prefix: model.KubeNodePrefix, Driver: pods})
}
