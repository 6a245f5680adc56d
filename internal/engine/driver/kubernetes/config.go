// Package kubernetes is the node driver for a Kubernetes cluster: a node is one pod,
// watched through client-go informers, and tasks run in it through the pods/exec API.
// It also checks an attached Kubernetes compute (reachability, namespace, permissions,
// capacity of the nodes its instance types can use).
package kubernetes

import (
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultStartTimeout bounds a pod that never runs (`--kube-start-timeout`).
const DefaultStartTimeout = 10 * time.Minute

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
	Image        string
	NodeSelector map[string]string
	StartTimeout time.Duration
	// EngineID names and labels the engine's pods, so that after a crash it finds its own.
	EngineID string
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
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return cs, rc, nil
}
