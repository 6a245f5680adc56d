package validation

import (
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// testKubeconfig is a kubeconfig with two contexts and a token that must never show in a
// message.
const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: https://10.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: ml
  user:
    token: s3cr3t-t0ken
contexts:
- name: lab
  context: {cluster: lab, user: ml}
- name: other
  context: {cluster: lab, user: ml, namespace: team}
current-context: lab
`

func TestKubernetes(t *testing.T) {
	ok := func() api.Kubernetes {
		return api.Kubernetes{Kubeconfig: testKubeconfig, InstanceTypes: map[string]api.InstanceType{
			"gpu": {NodeSelector: map[string]string{"nvidia.com/gpu.present": "true"}, Resources: &api.PodResources{
				Requests: map[string]string{"cpu": "1", "memory": "4Gi"},
				Limits:   map[string]string{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
			}},
			"small": {},
		}, DefaultInstanceType: "small"}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*api.Kubernetes)
		field string // "" when valid
		says  string
	}{
		{"Valid", func(*api.Kubernetes) {}, "", ""},
		{"Defaults", func(k *api.Kubernetes) { k.InstanceTypes, k.DefaultInstanceType = nil, "" }, "", ""},
		{"OtherContext", func(k *api.Kubernetes) { k.Context = "other" }, "", ""},
		{"NoKubeconfig", func(k *api.Kubernetes) { k.Kubeconfig = " " }, "kubernetes.kubeconfig", "is required"},
		{"NotYAML", func(k *api.Kubernetes) { k.Kubeconfig = "clusters: [" }, "kubernetes.kubeconfig", "is not a kubeconfig file"},
		{"NoServer", func(k *api.Kubernetes) {
			k.Kubeconfig = strings.Replace(testKubeconfig, "    server: https://10.0.0.1:6443\n", "", 1)
		}, "kubernetes.kubeconfig", "cannot be used"},
		{"UnknownContext", func(k *api.Kubernetes) { k.Context = "prod" }, "kubernetes.context", `"prod" is not a context of the kubeconfig; it has: lab, other`},
		{"NoCurrentContext", func(k *api.Kubernetes) {
			k.Kubeconfig = strings.Replace(testKubeconfig, "current-context: lab\n", "", 1)
		}, "kubernetes.context", "no current-context"},
		{"Namespace", func(k *api.Kubernetes) { k.Namespace = "Team_A" }, "kubernetes.namespace", `"Team_A" is not a namespace name`},
		{"Image", func(k *api.Kubernetes) { k.Image = "busybox latest" }, "kubernetes.image", "without spaces"},
		{"TypeName", func(k *api.Kubernetes) { k.InstanceTypes["GPU_big"] = api.InstanceType{} }, "kubernetes.instance_types.GPU_big", `instance type name "GPU_big" is not valid`},
		{"SelectorKey", func(k *api.Kubernetes) {
			k.InstanceTypes["small"] = api.InstanceType{NodeSelector: map[string]string{"bad key": "x"}}
		}, "kubernetes.instance_types.small.node_selector.bad key", "is not a label key"},
		{"SelectorValue", func(k *api.Kubernetes) {
			k.InstanceTypes["small"] = api.InstanceType{NodeSelector: map[string]string{"pool": "a b"}}
		}, "kubernetes.instance_types.small.node_selector.pool", "is not a label value"},
		{"Quantity", func(k *api.Kubernetes) {
			k.InstanceTypes["gpu"].Resources.Requests["memory"] = "4 GB"
		}, "kubernetes.instance_types.gpu.resources.requests.memory", `"4 GB" is not a Kubernetes quantity`},
		{"Negative", func(k *api.Kubernetes) {
			k.InstanceTypes["gpu"].Resources.Limits["cpu"] = "-1"
		}, "kubernetes.instance_types.gpu.resources.limits.cpu", "must not be negative"},
		{"ResourceName", func(k *api.Kubernetes) {
			k.InstanceTypes["gpu"].Resources.Limits["nvidia gpu"] = "1"
		}, "kubernetes.instance_types.gpu.resources.limits.nvidia gpu", "is not a resource name"},
		{"RequestOverLimit", func(k *api.Kubernetes) {
			k.InstanceTypes["gpu"].Resources.Requests["cpu"] = "2500m"
		}, "kubernetes.instance_types.gpu.resources.requests.cpu", "(2500m) is more than its limit (2)"},
		{"DefaultType", func(k *api.Kubernetes) { k.DefaultInstanceType = "huge" }, "kubernetes.default_instance_type", `"huge" is not one of kubernetes.instance_types (gpu, small)`},
		{"DefaultTypeWithoutTypes", func(k *api.Kubernetes) { k.InstanceTypes = nil; k.DefaultInstanceType = "gpu" }, "kubernetes.default_instance_type", "(defaultinstancetype)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := ok()
			tc.edit(&k)
			err := Kubernetes(k)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error on %s", tc.field)
			}
			if got := api.FieldOf(err); got != tc.field {
				t.Errorf("field = %q, want %q (%v)", got, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error shows the kubeconfig's token: %v", err)
			}
		})
	}
}

func TestJobInstanceType(t *testing.T) {
	k := api.Kubernetes{Kubeconfig: testKubeconfig}
	name, it, err := JobInstanceType(k, "")
	if err != nil || name != api.DefaultInstanceTypeName || it.Resources.Requests["cpu"] != "100m" || it.Resources.Limits["memory"] != "2Gi" {
		t.Fatalf("default: %q %+v %v", name, it, err)
	}
	_, _, err = JobInstanceType(k, "gpu")
	if api.FieldOf(err) != "instance_type" || !strings.Contains(err.Error(), `"gpu" is not one of this compute's instance types (defaultinstancetype)`) {
		t.Fatalf("unknown type: %v", err)
	}
}
