// Package kubernetes is the node driver for a Kubernetes cluster: a node is one pod,
// watched through client-go informers, and tasks run in it through the pods/exec API.
// It also checks an attached Kubernetes compute (reachability, namespace, permissions,
// capacity of the nodes its instance types can use).
//
//   - Create makes the pod <engine id>-<node key> (a DNS-1123 label; see PodName), labelled
//     and annotated with the engine id, the node key and the owner, so the engine finds its
//     own pods after a crash (Describe, List). The name is the key: a pod that exists is
//     returned, never made again. It requests (and is limited to) the VM size's vCPUs and
//     memory, with its GPUs as nvidia.com/gpu limits, or an attached compute's instance
//     type (driver.NodeSpec.Pod); its node selector is Config.NodeSelector merged with the
//     instance type's. Its only container runs Config.Image with a PID 1 shell that sleeps
//     until the pod is deleted. It returns at once: a pending pod is a node that is not
//     ready (Reason is Kubernetes': Unschedulable and the scheduler's message, the
//     container's waiting reason); NodeReady follows when its container runs.
//   - One shared informer watches the engine's pods (selected by the engine id's label): no
//     polling. A watched pod that is deleted by someone else, evicted, ends (OOMKilled, its
//     container's exit) or whose image cannot be pulled is NodeGone with Kubernetes' reason;
//     one not running within Config.StartTimeout is deleted and NodeGone.
//   - Tasks run under the wrapper of package ssh (TaskStore) through pods/exec, with their
//     files in the pod's /mlcompute/tasks (an emptyDir), so an engine restart loses
//     nothing; a task's end is noticed by one exec stream that waits for it in the pod.
//     The image needs /bin/sh, setsid and tar (and python3 for environments). A task
//     with an image (driver.TaskSpec.Container) runs in an ephemeral container of that
//     image in the node's pod, sharing its processes and files (container.go).
//   - Terminate deletes the pod with a short grace period and returns once the watch
//     reports it gone.
//   - An API that refuses (forbidden, invalid, a missing namespace) is driver.ErrPermanent
//     with its message; one that does not answer is driver.ErrTransient; an exceeded
//     quota is driver.ErrNoCapacity.
package kubernetes

import (
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultStartTimeout bounds a pod that never runs (`--kube-start-timeout`).
const DefaultStartTimeout = 10 * time.Minute

// DefaultNamespace is the namespace of the nodes' pods when none is given.
const DefaultNamespace = "default"

// RequestScaleEnv names the environment variable that sets Config.RequestScale for
// `mlcompute serve --nodes kubernetes`.
const RequestScaleEnv = "MLCOMPUTE_KUBE_REQUEST_SCALE"

// ImageEnv names the environment variable that gives the default node image when
// `--kube-image` is not set.
const ImageEnv = "MLCOMPUTE_KUBE_IMAGE"

// Config says which cluster and namespace the driver uses and how its pods look.
type Config struct {
	// Kubeconfig is a kubeconfig file's content (an attached compute's `kubeconfig`);
	// when empty, KubeconfigPath is read, else KUBECONFIG, else ~/.kube/config, else the
	// in-cluster configuration.
	Kubeconfig     []byte
	KubeconfigPath string
	// Context picks a kubeconfig context; empty means the current one.
	Context   string
	Namespace string
	// Image is the pods' image; it needs /bin/sh (and python3 for environments).
	Image string
	// Archive, when set, is the image archive Image is imported from, by Importer, into
	// the containerd of the nodes the pods may run on; the pods run on those only
	// (archive.go).
	Archive      *ImageArchive
	Importer     ImageImporter
	NodeSelector map[string]string
	StartTimeout time.Duration
	// EngineID names and labels the engine's pods, so that after a crash it finds its own.
	EngineID string
	// RequestScale, in (0, 1), scales what a VM size's pod requests (not its limits), so
	// that a small cluster (a test machine) schedules several nodes; 0 or 1 requests the
	// size as it is.
	RequestScale float64
	// Clock times the start timeout; the real clock when nil.
	Clock  clock.WithTicker
	Logger hclog.Logger

	// schedulingGates hold new pods before scheduling (tests make them ready from outside).
	schedulingGates []string
}

// RESTConfig resolves the client configuration the way kubectl does: explicit content,
// then an explicit path, then KUBECONFIG and ~/.kube/config, then in-cluster.
func (c Config) RESTConfig() (*rest.Config, error) {
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.Context}
	if len(c.Kubeconfig) > 0 {
		raw, err := clientcmd.Load(c.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("reading the kubeconfig: %w", err)
		}
		rc, err := clientcmd.NewDefaultClientConfig(*raw, overrides).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("reading the kubeconfig: %w", err)
		}
		return rc, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.KubeconfigPath != "" {
		if _, err := os.Stat(c.KubeconfigPath); err != nil {
			return nil, fmt.Errorf("reading the kubeconfig: %w", err)
		}
		rules.ExplicitPath = c.KubeconfigPath
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return rc, nil
}

// Clientset builds a typed client from the configuration.
func (c Config) Clientset() (*kubernetes.Clientset, *rest.Config, error) {
	rc, err := c.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	if rc.QPS == 0 && rc.Burst == 0 {
		// client-go's default (5 a second, bursts of 10) makes 200 nodes take 40 s to
		// create; an engine scaling out creates and deletes pods in bursts.
		rc.QPS, rc.Burst = 50, 100
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return cs, rc, nil
}
