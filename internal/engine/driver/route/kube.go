package route

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
)

// NewKubeDriver builds the node driver of one attached Kubernetes cluster: a node is a
// pod in cfg.Namespace made with the shape of NodeSpec.Pod. The driver lives until ctx
// ends or it is closed. The composition root points it at package kubernetes's driver.
type NewKubeDriver func(ctx context.Context, cfg kubernetes.Config) (driver.Driver, error)

// kubeDrivers is the driver.Driver of every pod made for a job on an attached cluster: it
// asks the store (Lookups.KubeNode) for the node's cluster, as its job compute copied it
// at submit time, and calls that cluster's driver, built on first use and kept for the
// engine's life, one per kubeconfig, context, namespace and image.
type kubeDrivers struct {
	ctx     context.Context
	lookups Lookups
	image   string // Config.DefaultKubeImage
	build   NewKubeDriver
	log     hclog.Logger
	events  chan driver.Event

	mu      sync.Mutex
	drivers map[string]driver.Driver
	// listed remembers which driver listed a node the store does not record (an orphan),
	// so that its Terminate reaches the right cluster.
	listed map[string]driver.Driver
}

var (
	_ driver.Driver        = (*kubeDrivers)(nil)
	_ driver.OutputWatcher = (*kubeDrivers)(nil)
)

func newKubeDrivers(ctx context.Context, cfg Config) *kubeDrivers {
	return &kubeDrivers{ctx: ctx, lookups: cfg.Lookups, image: cfg.DefaultKubeImage, build: cfg.NewKubeDriver, log: cfg.Logger.Named("kubernetes"),
		events: make(chan driver.Event), drivers: map[string]driver.Driver{}, listed: map[string]driver.Driver{}}
}

func clusterKey(cfg kubernetes.Config) string {
	h := sha256.New()
	for _, part := range [][]byte{cfg.Kubeconfig, []byte(cfg.Context), []byte(cfg.Namespace), []byte(cfg.Image)} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// driverFor returns the driver of a cluster, building it (and forwarding its events)
// on first use.
func (k *kubeDrivers) driverFor(cfg kubernetes.Config) (driver.Driver, error) {
	if k.build == nil {
		return nil, driver.Permanent(errors.New("this engine has no Kubernetes node driver"))
	}
	key := clusterKey(cfg)
	k.mu.Lock()
	defer k.mu.Unlock()
	if d, ok := k.drivers[key]; ok {
		return d, nil
	}
	d, err := k.build(k.ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the driver of the cluster's namespace %q: %w", cfg.Namespace, err)
	}
	k.drivers[key] = d
	go func() {
		for {
			select {
			case <-k.ctx.Done():
				return
			case ev := <-d.Events():
				select {
				case k.events <- ev:
				case <-k.ctx.Done():
					return
				}
			}
		}
	}()
	return d, nil
}

// route finds the driver of a stored node's cluster, or the one that listed an orphan.
func (k *kubeDrivers) route(nodeKey string) (driver.Driver, error) {
	cluster, ok, err := k.lookups.KubeNode(nodeKey)
	if err != nil {
		return nil, err
	}
	if !ok {
		k.mu.Lock()
		d, ok := k.listed[nodeKey]
		k.mu.Unlock()
		if ok {
			return d, nil
		}
		return nil, driver.NotFound(fmt.Errorf("node %s is not a pod of an attached Kubernetes cluster the engine records", nodeKey))
	}
	return k.driverFor(KubeConfig(cluster, k.image))
}

func (k *kubeDrivers) Name() string { return "kubernetes" }

func (k *kubeDrivers) Create(ctx context.Context, spec driver.NodeSpec) (driver.NodeInfo, error) {
	d, err := k.route(spec.Key)
	if err != nil {
		return driver.NodeInfo{}, err
	}
	return d.Create(ctx, spec)
}

func (k *kubeDrivers) Describe(ctx context.Context, key string) (driver.NodeInfo, error) {
	d, err := k.route(key)
	if err != nil {
		return driver.NodeInfo{}, err
	}
	return d.Describe(ctx, key)
}

// List lists the pods of every cluster that a job compute in the store names (those are
// the only clusters that may hold the engine's pods). A cluster that does not answer is
// logged and left out, so that it cannot hold up the engine's start; its pods are
// adopted or released once it answers and their jobs' computes are reconciled.
func (k *kubeDrivers) List(ctx context.Context, owner string) ([]driver.NodeInfo, error) {
	clusters, err := k.lookups.KubeClusters()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []driver.NodeInfo
	for _, cluster := range clusters {
		cfg := KubeConfig(cluster, k.image)
		if seen[clusterKey(cfg)] {
			continue
		}
		seen[clusterKey(cfg)] = true
		d, err := k.driverFor(cfg)
		if err == nil {
			var nodes []driver.NodeInfo
			if nodes, err = d.List(ctx, owner); err == nil {
				k.mu.Lock()
				for _, n := range nodes {
					k.listed[n.Key] = d
				}
				k.mu.Unlock()
				out = append(out, nodes...)
				continue
			}
		}
		k.log.Error("listing the pods of an attached cluster failed", "namespace", cfg.Namespace, "error", err)
	}
	return out, nil
}

func (k *kubeDrivers) Terminate(ctx context.Context, key string) error {
	d, err := k.route(key)
	if driver.IsNotFound(err) {
		return nil // neither recorded nor listed: nothing of ours to delete
	}
	if err != nil {
		return err
	}
	if err := d.Terminate(ctx, key); err != nil {
		return err
	}
	k.mu.Lock()
	delete(k.listed, key)
	k.mu.Unlock()
	return nil
}

func (k *kubeDrivers) StartTask(ctx context.Context, nodeKey string, spec driver.TaskSpec) error {
	d, err := k.route(nodeKey)
	if err != nil {
		return err
	}
	return d.StartTask(ctx, nodeKey, spec)
}

func (k *kubeDrivers) TaskStatus(ctx context.Context, nodeKey, taskKey string) (driver.TaskStatus, error) {
	d, err := k.route(nodeKey)
	if err != nil {
		return driver.TaskStatus{}, err
	}
	return d.TaskStatus(ctx, nodeKey, taskKey)
}

func (k *kubeDrivers) TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error) {
	d, err := k.route(nodeKey)
	if err != nil {
		return nil, err
	}
	return d.TaskOutput(ctx, nodeKey, taskKey, offset)
}

func (k *kubeDrivers) WatchOutput(ctx context.Context, nodeKey, taskKey string) (<-chan struct{}, error) {
	d, err := k.route(nodeKey)
	if err != nil {
		return nil, err
	}
	w, ok := d.(driver.OutputWatcher)
	if !ok {
		return nil, driver.Permanent(errors.New("this node's driver does not watch task output"))
	}
	return w.WatchOutput(ctx, nodeKey, taskKey)
}

func (k *kubeDrivers) KillTask(ctx context.Context, nodeKey, taskKey string) error {
	d, err := k.route(nodeKey)
	if err != nil {
		return err
	}
	return d.KillTask(ctx, nodeKey, taskKey)
}

func (k *kubeDrivers) FetchOutput(ctx context.Context, nodeKey, taskKey, rel string) (io.ReadCloser, error) {
	d, err := k.route(nodeKey)
	if err != nil {
		return nil, err
	}
	return d.FetchOutput(ctx, nodeKey, taskKey, rel)
}

func (k *kubeDrivers) TaskPort(ctx context.Context, nodeKey string) (int, error) {
	d, err := k.route(nodeKey)
	if err != nil {
		return 0, err
	}
	return d.TaskPort(ctx, nodeKey)
}

func (k *kubeDrivers) Exec(ctx context.Context, nodeKey string, spec driver.ExecSpec) (int, error) {
	d, err := k.route(nodeKey)
	if err != nil {
		return 0, err
	}
	return d.Exec(ctx, nodeKey, spec)
}

// Events merges the events of every cluster's driver.
func (k *kubeDrivers) Events() <-chan driver.Event { return k.events }

// Close closes every cluster's driver; their pods keep running for the next start.
func (k *kubeDrivers) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var first error
	for key, d := range k.drivers {
		if err := d.Close(); err != nil && first == nil {
			first = err
		}
		delete(k.drivers, key)
	}
	return first
}
