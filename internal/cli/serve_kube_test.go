package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
)

func defaultKubeFlags() kubeFlags {
	return kubeFlags{namespace: kubernetes.DefaultNamespace, startTimeout: kubernetes.DefaultStartTimeout}
}

func TestKubeFlagsNeedNodesKubernetes(t *testing.T) {
	for name, edit := range map[string]func(*kubeFlags){
		"--kube-config":        func(f *kubeFlags) { f.kubeconfig = "/k" },
		"--kube-context":       func(f *kubeFlags) { f.context = "c" },
		"--kube-namespace":     func(f *kubeFlags) { f.namespace = "ml" },
		"--kube-image":         func(f *kubeFlags) { f.image = "img" },
		"--kube-node-selector": func(f *kubeFlags) { f.nodeSelector = []string{"pool=cpu"} },
		"--kube-start-timeout": func(f *kubeFlags) { f.startTimeout = time.Minute },
	} {
		f := defaultKubeFlags()
		edit(&f)
		if _, err := f.config(false); err == nil || !strings.Contains(err.Error(), "--nodes kubernetes") {
			t.Errorf("%s without --nodes kubernetes: %v, want an error naming --nodes kubernetes", name, err)
		}
	}
	f := defaultKubeFlags()
	if _, err := f.config(false); err != nil {
		t.Errorf("no --kube-* flag without --nodes kubernetes: %v", err)
	}
}

func TestKubeFlagsRefuseBadValues(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(*kubeFlags)
		want string
	}{
		"zero start timeout":   {func(f *kubeFlags) { f.startTimeout = 0 }, "--kube-start-timeout must be positive"},
		"selector without '='": {func(f *kubeFlags) { f.nodeSelector = []string{"pool"} }, `--kube-node-selector "pool": use k=v`},
		"selector without key": {func(f *kubeFlags) { f.nodeSelector = []string{"=cpu"} }, "use k=v"},
		"empty namespace":      {func(f *kubeFlags) { f.namespace = "" }, "--kube-namespace must not be empty"},
	} {
		f := defaultKubeFlags()
		c.edit(&f)
		if _, err := f.config(true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	t.Setenv(kubernetes.RequestScaleEnv, "2")
	f := defaultKubeFlags()
	if _, err := f.config(true); err == nil || !strings.Contains(err.Error(), kubernetes.RequestScaleEnv) {
		t.Errorf("%s=2: %v, want an error naming it", kubernetes.RequestScaleEnv, err)
	}
}

func TestKubeFlagsMakeTheDriverConfig(t *testing.T) {
	t.Setenv(kubernetes.RequestScaleEnv, "0.25")
	f := kubeFlags{kubeconfig: "/k", context: "c", namespace: "ml", image: "img", nodeSelector: []string{"pool=cpu", "zone=a=b"}, startTimeout: time.Minute}
	cfg, err := f.config(true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KubeconfigPath != "/k" || cfg.Context != "c" || cfg.Namespace != "ml" || cfg.Image != "img" || cfg.StartTimeout != time.Minute ||
		cfg.NodeSelector["pool"] != "cpu" || cfg.NodeSelector["zone"] != "a=b" || len(cfg.NodeSelector) != 2 || cfg.RequestScale != 0.25 {
		t.Fatalf("config = %+v", cfg)
	}
}

// The pods' image is --kube-image, else MLCOMPUTE_KUBE_IMAGE, which serve reads (the driver
// reads no variable itself); it is read without --nodes kubernetes too, for the job pods of
// attached clusters that name no image.
func TestKubeImageFromTheFlagElseTheVariable(t *testing.T) {
	t.Setenv(kubernetes.ImageEnv, "from-env:1")
	f := defaultKubeFlags()
	if cfg, err := f.config(false); err != nil || cfg.Image != "from-env:1" {
		t.Fatalf("no --kube-image: image %q, %v; want %s's", cfg.Image, err, kubernetes.ImageEnv)
	}
	f.image = "from-flag:2"
	if cfg, err := f.config(true); err != nil || cfg.Image != "from-flag:2" {
		t.Fatalf("--kube-image from-flag:2: image %q, %v; want the flag's", cfg.Image, err)
	}
}
