package api

// VirtualMachine describes an attached machine reached over SSH. Password and PrivateKey
// are inputs only: the engine keeps them in its store and never returns them, so every
// read of an attached compute has them empty.
type VirtualMachine struct {
	Address string `json:"address"`
	// SSHPort is the SSH port; 0 in a spec means DefaultSSHPort.
	SSHPort  int64  `json:"ssh_port,omitempty"`
	Username string `json:"username"`
	// Password and PrivateKey (PEM, no passphrase): exactly one.
	Password   string `json:"password,omitempty"`
	PrivateKey string `json:"private_key,omitempty"`
	// HostKeyFingerprint pins the machine's host key, OpenSSH "SHA256:..." form. Empty in
	// a spec pins the first key seen; a read returns the pinned one.
	HostKeyFingerprint string `json:"host_key_fingerprint,omitempty"`
	// VCPUs and MemoryGB are what the machine reported when it was attached.
	VCPUs    int64   `json:"vcpus,omitempty"`
	MemoryGB float64 `json:"memory_gb,omitempty"`
}

// DefaultSSHPort is an attached machine's SSH port when none is given.
const DefaultSSHPort = 22

// TypeKubernetes is the type of an attached Kubernetes cluster, as Azure Machine Learning
// names its Kubernetes compute.
const TypeKubernetes = "Kubernetes"

// Kubernetes describes an attached Kubernetes cluster: where its API is, the namespace its
// job pods run in and the instance types jobs choose from. Kubeconfig is an input only:
// the engine keeps it in its store and never returns it, so every read has it empty.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file's content.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context picks one of the kubeconfig's contexts; empty means its current context.
	Context string `json:"context,omitempty"`
	// Namespace is where job pods run; empty in a spec means DefaultKubeNamespace.
	Namespace string `json:"namespace,omitempty"`
	// Image is the job pods' image; it needs /bin/sh. Empty means the engine's default
	// (its MLCOMPUTE_KUBE_IMAGE).
	Image string `json:"image,omitempty"`
	// InstanceTypes say where a job's pods run and what they request; empty in a spec
	// means the one DefaultInstanceTypeName with DefaultInstanceType's resources.
	InstanceTypes map[string]InstanceType `json:"instance_types,omitempty"`
	// DefaultInstanceType is the instance type of a job that names none; empty in a spec
	// means DefaultInstanceTypeName.
	DefaultInstanceType string `json:"default_instance_type,omitempty"`
	// VCPUs and MemoryGB are the allocatable CPU and memory of the nodes the instance
	// types can use, read when the cluster was attached or its settings changed.
	VCPUs    int64   `json:"vcpus,omitempty"`
	MemoryGB float64 `json:"memory_gb,omitempty"`
}

// InstanceType is one instance type of an attached Kubernetes cluster: the nodes its pods
// may run on (node labels) and the resources each pod requests and is limited to, in
// Kubernetes' quantity syntax ("500m", "4Gi"), keyed by resource name ("cpu", "memory",
// "nvidia.com/gpu").
type InstanceType struct {
	NodeSelector map[string]string `json:"node_selector,omitempty"`
	Resources    *PodResources     `json:"resources,omitempty"`
}

// PodResources are a pod's resource requests and limits.
type PodResources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// Defaults of an attached Kubernetes cluster, as Azure Machine Learning's.
const (
	DefaultKubeNamespace    = "default"
	DefaultInstanceTypeName = "defaultinstancetype"
)

// DefaultInstanceType is the instance type of a cluster attached without instance_types:
// requests cpu 100m and memory 2Gi, limits cpu 2 and memory 2Gi (Azure's).
func DefaultInstanceType() InstanceType {
	return InstanceType{Resources: &PodResources{
		Requests: map[string]string{"cpu": "100m", "memory": "2Gi"},
		Limits:   map[string]string{"cpu": "2", "memory": "2Gi"},
	}}
}

// WithDefaults fills what the user left out; it is the one place the defaults are set.
func (k Kubernetes) WithDefaults() Kubernetes {
	if k.Namespace == "" {
		k.Namespace = DefaultKubeNamespace
	}
	if len(k.InstanceTypes) == 0 {
		k.InstanceTypes = map[string]InstanceType{DefaultInstanceTypeName: DefaultInstanceType()}
	}
	if k.DefaultInstanceType == "" {
		k.DefaultInstanceType = DefaultInstanceTypeName
	}
	return k
}
