package attached

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// An attached Kubernetes cluster is a record with no nodes of its own: it never keeps a
// pod while idle. A job on it gets a compute record of its own (model.KubeJob, named
// model.KubeJobComputePrefix + the job's ID) that is a cluster of the job's instance count
// with no idle time, whose nodes are pods of the job's instance type, made through the
// cluster's node driver (KubeDrivers) and deleted when the job ends, as serverless jobs'
// nodes are.

// kubeCheckTimeout bounds the checks of an attach or an update, and the instance type's
// check at job submission.
const kubeCheckTimeout = 60 * time.Second

// KubeNode is the cluster of a job pod's node, as its job compute recorded it
// (driver/route's Lookups).
func (c *Controller) KubeNode(nodeKey string) (model.KubeCluster, bool, error) {
	var k model.KubeCluster
	var ok bool
	err := c.core.View(func(tx *store.Tx) error {
		n, found := c.core.NodeByID(tx, nodeKey)
		if !found {
			return nil
		}
		var rec model.Compute
		if found, err := tx.Get(store.Computes, n.Compute, &rec); err != nil || !found || rec.KubeJob == nil {
			return err
		}
		k, ok = rec.KubeJob.Cluster, true
		return nil
	})
	return k, ok, err
}

// KubeClusters are the clusters the store's job computes name, the only ones that may
// hold the engine's pods (driver/route's Lookups).
func (c *Controller) KubeClusters() ([]model.KubeCluster, error) {
	var out []model.KubeCluster
	err := c.core.View(func(tx *store.Tx) error {
		recs, err := store.List[model.Compute](tx, store.Computes, "")
		for _, rec := range recs {
			if rec.KubeJob != nil {
				out = append(out, rec.KubeJob.Cluster)
			}
		}
		return err
	})
	return out, err
}

// shapes are a cluster's instance types as pod shapes, sorted by name.
func shapes(k model.KubeCluster) []driver.PodShape {
	var out []driver.PodShape
	for _, name := range slices.Sorted(maps.Keys(k.InstanceTypes)) {
		out = append(out, shapeOf(name, k.InstanceTypes[name]))
	}
	return out
}

func shapeOf(name string, it api.InstanceType) driver.PodShape {
	rec := model.Compute{KubeJob: &model.KubeJob{InstanceType: name, Shape: it}}
	return *computes.PodShape(rec)
}

// checkCluster checks that the cluster can run job pods and reads what its instance types
// can use, turning every failure into an error on the setting to fix. A credential that
// may not list nodes leaves the capacity at zero.
func (c *Controller) checkCluster(ctx context.Context, k model.KubeCluster) (Capacity, error) {
	ctx, cancel := context.WithTimeout(ctx, kubeCheckTimeout)
	defer cancel()
	if err := c.cfg.Clusters.Access(ctx, k); err != nil {
		return Capacity{}, kubeError("cannot attach the cluster", err)
	}
	capacity, err := c.cfg.Clusters.Capacity(ctx, k, shapes(k))
	if err != nil {
		return capacity, kubeError("cannot read the capacity of the cluster's nodes", err)
	}
	if !capacity.Listed {
		c.log.Warn("the credentials may not list nodes: vcpus and memory_gb stay 0", "namespace", k.Namespace)
	}
	return capacity, nil
}

func kubeError(doing string, err error) error {
	var se *SettingError
	switch {
	case errors.As(err, &se):
		return api.Errorf(api.CodeInvalid, se.Setting, "%s: %v", doing, err)
	case errors.Is(err, context.Canceled):
		return api.Errorf(api.CodeUnavailable, "", "%s: cancelled", doing)
	}
	return api.Errorf(api.CodeInvalid, "kubernetes.kubeconfig", "%s: %v", doing, err)
}

// noDefaultImage refuses a cluster without kubernetes.image on an engine without a
// default image.
func (c *Controller) noDefaultImage(k model.KubeCluster) error {
	if k.Image != "" || c.cfg.DefaultKubeImage != "" {
		return nil
	}
	return api.Errorf(api.CodeInvalid, "kubernetes.image", "kubernetes.image is not set and the engine has no default image (%s): set the image job pods run; it needs /bin/sh", c.cfg.DefaultKubeImageFrom)
}

// CreateKubernetes attaches a Kubernetes cluster: it checks the settings, that the API
// answers, that the namespace exists and that the credentials may run job pods there,
// and reads the capacity of the nodes its instance types can use, all before anything is
// recorded, so a failure leaves nothing behind.
func (c *Controller) CreateKubernetes(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	spec.Type = api.TypeKubernetes
	if err := validation.AttachedCompute(spec); err != nil {
		return nil, err
	}
	k := model.KubeClusterFrom(*spec.Kubernetes)
	if err := c.noDefaultImage(k); err != nil {
		return nil, err
	}
	replay, err := c.checkNew(workspace, spec.Name, idempotencyKey)
	if err != nil {
		return nil, err
	}
	if replay {
		return c.core.GetCompute(ctx, workspace, spec.Name)
	}
	capacity, err := c.checkCluster(ctx, k)
	if err != nil {
		return nil, err
	}
	k.VCPUs, k.MemoryGB = capacity.VCPUs, capacity.MemoryGB
	rec := model.Compute{
		Workspace: workspace, Name: spec.Name, Type: api.TypeKubernetes, Description: spec.Description, Tags: spec.Tags,
		CreatedOn: c.core.Clock().Now().UTC(), Kubernetes: &k,
	}
	out, err := c.core.Insert(ctx, rec, idempotencyKey, "")
	if err == nil {
		c.log.Info("kubernetes cluster attached", "compute", rec.Key(), "namespace", k.Namespace, "context", k.Context,
			"instance_types", len(k.InstanceTypes), "nodes", capacity.Nodes, "vcpus", k.VCPUs, "memory_gb", k.MemoryGB)
	}
	return out, err
}

// updateKubernetes replaces an attached cluster's settings in place. New connection
// settings (kubeconfig, context, namespace) are checked against the cluster as at attach
// time before they replace the old ones, and the capacity is read again when they or the
// instance types change. Jobs already running keep the settings they started with.
func (c *Controller) updateKubernetes(ctx context.Context, rec model.Compute, upd api.ComputeUpdate) (*api.Compute, error) {
	next := *rec.Kubernetes
	if upd.Kubernetes != nil {
		if err := validation.Kubernetes(*upd.Kubernetes); err != nil {
			return nil, err
		}
		next = model.KubeClusterFrom(*upd.Kubernetes)
		next.VCPUs, next.MemoryGB = rec.Kubernetes.VCPUs, rec.Kubernetes.MemoryGB
		if err := c.noDefaultImage(next); err != nil {
			return nil, err
		}
		if !next.SameConnection(*rec.Kubernetes) || !maps.EqualFunc(next.InstanceTypes, rec.Kubernetes.InstanceTypes, sameInstanceType) {
			capacity, err := c.checkCluster(ctx, next)
			if err != nil {
				return nil, err
			}
			next.VCPUs, next.MemoryGB = capacity.VCPUs, capacity.MemoryGB
		}
	}
	return c.core.Modify(ctx, rec.Workspace, rec.Name, func(_ *api.Workspace, cur *model.Compute) error {
		cur.Description, cur.Tags, cur.Kubernetes = upd.Description, upd.Tags, &next
		return nil
	})
}

func sameInstanceType(a, b api.InstanceType) bool {
	var ar, br api.PodResources
	if a.Resources != nil {
		ar = *a.Resources
	}
	if b.Resources != nil {
		br = *b.Resources
	}
	return maps.Equal(a.NodeSelector, b.NodeSelector) && maps.Equal(ar.Requests, br.Requests) && maps.Equal(ar.Limits, br.Limits)
}

// KubeJob resolves the instance type a job on an attached cluster asks for and checks,
// before the job is queued, that some node of the cluster can run its pods. It returns the
// job compute's KubeJob part; the caller stores it under the job's lock.
func (c *Controller) KubeJob(ctx context.Context, rec model.Compute, instanceType string) (*model.KubeJob, error) {
	name, it, err := validation.JobInstanceType(rec.Kubernetes.Spec(), instanceType)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, kubeCheckTimeout)
	defer cancel()
	if err := c.cfg.Clusters.InstanceType(ctx, *rec.Kubernetes, shapeOf(name, it)); err != nil {
		var se *SettingError
		if errors.As(err, &se) {
			return nil, api.Errorf(api.CodeUnavailable, "compute", "attached Kubernetes compute %q cannot be reached: %v", rec.Name, err)
		}
		return nil, api.Errorf(api.CodeInvalid, "instance_type", "%v", err)
	}
	if !c.cfg.KubeJobs {
		return nil, api.Errorf(api.CodeUnavailable, "compute", "this engine has no Kubernetes node driver, so jobs cannot run on attached Kubernetes compute %q", rec.Name)
	}
	return &model.KubeJob{Parent: rec.Name, Cluster: *rec.Kubernetes, InstanceType: name, Shape: it}, nil
}

// KubePass is the pass of an attached cluster's own record: it holds no nodes (its jobs
// run on computes of their own), so there is nothing to decide.
func KubePass(*store.Tx, *model.Compute, []model.Node, []model.Job, time.Time) (computes.Actions, error) {
	return computes.Actions{}, nil
}
