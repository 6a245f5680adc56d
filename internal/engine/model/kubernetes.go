package model

import (
	"maps"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// KubeNodePrefix starts the keys of the pods made for jobs on attached Kubernetes
// clusters, which is how the engine's routing driver sends them to the cluster's driver.
const KubeNodePrefix = "kube-"

// KubeJobComputePrefix starts the name of the compute record made for one job on an
// attached Kubernetes cluster ("kubernetes-job-00000042"). No user's compute can be named
// so: compute names may not end in '-' and digits.
const KubeJobComputePrefix = "kubernetes-"

// KubeCluster is an attached Kubernetes cluster as stored, kubeconfig included. The
// store is a 0600 file; reads go through API, which leaves the kubeconfig out.
type KubeCluster struct {
	Kubeconfig string `json:"kubeconfig"`
	Context    string `json:"context,omitempty"`
	Namespace  string `json:"namespace"`
	Image      string `json:"image,omitempty"`
	// Archive, on a job's copy, is the image archive Image is imported from into a node's
	// containerd before the job's pods run there.
	Archive             *KubeArchive                `json:"archive,omitempty"`
	InstanceTypes       map[string]api.InstanceType `json:"instance_types"`
	DefaultInstanceType string                      `json:"default_instance_type"`
	VCPUs               int64                       `json:"vcpus"`
	MemoryGB            float64                     `json:"memory_gb"`
}

// KubeArchive is an environment's image archive that a job's pods run on an attached
// cluster, once imported into a node's containerd.
type KubeArchive struct {
	// Path is the archive on the engine's machine; Hash the environment's content hash,
	// which names the image.
	Path string `json:"path"`
	Hash string `json:"hash"`
	// ImportImage is the image of the pod that imports it: the cluster's own.
	ImportImage string `json:"import_image,omitempty"`
}

// KubeClusterFrom is the stored form of a validated spec, defaults applied.
func KubeClusterFrom(k api.Kubernetes) KubeCluster {
	k = k.WithDefaults()
	return KubeCluster{
		Kubeconfig: k.Kubeconfig, Context: k.Context, Namespace: k.Namespace, Image: k.Image,
		InstanceTypes: maps.Clone(k.InstanceTypes), DefaultInstanceType: k.DefaultInstanceType,
	}
}

// Spec is the cluster as a spec, kubeconfig included (for the shared rules).
func (k KubeCluster) Spec() api.Kubernetes {
	return api.Kubernetes{
		Kubeconfig: k.Kubeconfig, Context: k.Context, Namespace: k.Namespace, Image: k.Image,
		InstanceTypes: k.InstanceTypes, DefaultInstanceType: k.DefaultInstanceType,
	}
}

// API is what a read shows: everything but the kubeconfig.
func (k KubeCluster) API() *api.Kubernetes {
	out := k.Spec()
	out.Kubeconfig, out.VCPUs, out.MemoryGB = "", k.VCPUs, k.MemoryGB
	return &out
}

// SameConnection reports whether two clusters are reached the same way (kubeconfig,
// context and namespace), so the checks made when it was attached still hold.
func (k KubeCluster) SameConnection(o KubeCluster) bool {
	return k.Kubeconfig == o.Kubeconfig && k.Context == o.Context && k.Namespace == o.Namespace
}

// KubeJob is the part of a job's own compute record (Serverless, ForJob) that says which
// attached cluster its pods run on and with which instance type. The cluster's settings
// are copied at submit time, so a job keeps the cluster it started on when the attached
// compute is updated.
type KubeJob struct {
	// Parent is the attached compute's name.
	Parent       string           `json:"parent"`
	Cluster      KubeCluster      `json:"cluster"`
	InstanceType string           `json:"instance_type"`
	Shape        api.InstanceType `json:"shape"`
}

// IsKubeJobCompute reports whether a compute record name is one made for a job on an
// attached Kubernetes cluster.
func IsKubeJobCompute(name string) bool { return strings.HasPrefix(name, KubeJobComputePrefix) }
