package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
)

// kubeFlags are serve's --kube-* flags, which configure --nodes kubernetes.
type kubeFlags struct {
	kubeconfig, context, namespace, image string
	nodeSelector                          []string
	startTimeout                          time.Duration
}

func (f *kubeFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.kubeconfig, "kube-config", "", "kubeconfig file of the cluster, with --nodes kubernetes (default: KUBECONFIG, else ~/.kube/config, else the in-cluster configuration)")
	fl.StringVar(&f.context, "kube-context", "", "kubeconfig context to use (default: its current context)")
	fl.StringVar(&f.namespace, "kube-namespace", kubernetes.DefaultNamespace, "namespace of the nodes' pods")
	fl.StringVar(&f.image, "kube-image", "", "image of the nodes' pods; it needs /bin/sh, setsid and tar, and python3 for environments (default: "+kubernetes.ImageEnv+")")
	fl.StringArrayVar(&f.nodeSelector, "kube-node-selector", nil, "k=v: a node label the nodes' pods require (repeatable)")
	fl.DurationVar(&f.startTimeout, "kube-start-timeout", kubernetes.DefaultStartTimeout, "delete a node's pod that is not running this long after its creation; the node becomes unusable")
}

// config returns the kubernetes driver's configuration; the flags are refused without
// --nodes kubernetes, where they would do nothing.
func (f *kubeFlags) config(enabled bool) (kubernetes.Config, error) {
	cfg := kubernetes.Config{
		KubeconfigPath: f.kubeconfig, Context: f.context, Namespace: f.namespace, Image: f.image,
		StartTimeout: f.startTimeout,
	}
	if cfg.Image == "" {
		cfg.Image = os.Getenv(kubernetes.ImageEnv)
	}
	if f.startTimeout <= 0 {
		return cfg, fmt.Errorf("--kube-start-timeout must be positive, got %s", f.startTimeout)
	}
	if f.namespace == "" {
		return cfg, fmt.Errorf("--kube-namespace must not be empty (default %q)", kubernetes.DefaultNamespace)
	}
	for _, kv := range f.nodeSelector {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cfg, fmt.Errorf("--kube-node-selector %q: use k=v (a node label and its value)", kv)
		}
		if cfg.NodeSelector == nil {
			cfg.NodeSelector = map[string]string{}
		}
		cfg.NodeSelector[k] = v
	}
	set := f.kubeconfig != "" || f.context != "" || f.namespace != kubernetes.DefaultNamespace || f.image != "" ||
		len(f.nodeSelector) > 0 || f.startTimeout != kubernetes.DefaultStartTimeout
	if set && !enabled {
		return cfg, fmt.Errorf("the --kube-* flags configure --nodes kubernetes; add --nodes kubernetes or remove them")
	}
	if enabled {
		if raw := os.Getenv(kubernetes.RequestScaleEnv); raw != "" {
			s, err := strconv.ParseFloat(raw, 64)
			if err != nil || s <= 0 || s > 1 {
				return cfg, fmt.Errorf("%s=%q: use a number in (0, 1]", kubernetes.RequestScaleEnv, raw)
			}
			cfg.RequestScale = s
		}
	}
	return cfg, nil
}
