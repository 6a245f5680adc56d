package validation

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// MaxInstanceTypes bounds an attached Kubernetes cluster's instance types.
const MaxInstanceTypes = 64

// Kubernetes checks an attached Kubernetes cluster's settings, defaults applied: the
// kubeconfig parses and has the context, the namespace and instance type names are DNS
// labels, node selectors are valid labels, every resource quantity parses and no request
// exceeds its limit, and default_instance_type names one of the instance types. Messages
// never show the kubeconfig's content.
func Kubernetes(k api.Kubernetes) error {
	if err := Kubeconfig(k.Kubeconfig, k.Context); err != nil {
		return err
	}
	return KubernetesSettings(k)
}

// KubernetesSettings checks everything of Kubernetes but the kubeconfig and context (the
// provider checks those apart, when their values are known at plan time).
func KubernetesSettings(k api.Kubernetes) error {
	k = k.WithDefaults()
	if err := KubeNamespace(k.Namespace); err != nil {
		return err
	}
	if strings.ContainsAny(k.Image, " \t\r\n") {
		return api.Errorf(api.CodeInvalid, "kubernetes.image", "kubernetes.image %q must be an image reference such as registry.example.com/ml/train:1.4, without spaces", k.Image)
	}
	if len(k.InstanceTypes) > MaxInstanceTypes {
		return api.Errorf(api.CodeInvalid, "kubernetes.instance_types", "kubernetes.instance_types has %d entries; at most %d are allowed", len(k.InstanceTypes), MaxInstanceTypes)
	}
	names := slices.Sorted(mapKeys(k.InstanceTypes))
	for _, name := range names {
		if err := InstanceType(name, k.InstanceTypes[name]); err != nil {
			return err
		}
	}
	return DefaultInstanceType(k.DefaultInstanceType, names)
}

// Kubeconfig checks that a kubeconfig's content parses and names a cluster to talk to:
// the given context, else its current context.
func Kubeconfig(content, context string) error {
	const field = "kubernetes.kubeconfig"
	if strings.TrimSpace(content) == "" {
		return api.Errorf(api.CodeInvalid, field, "kubernetes.kubeconfig is required: the content of a kubeconfig file, for example file(\"~/.kube/config\")")
	}
	cfg, err := clientcmd.Load([]byte(content))
	if err != nil {
		// The loader's message names the YAML problem (a line number), never a credential.
		return api.Errorf(api.CodeInvalid, field, "kubernetes.kubeconfig is not a kubeconfig file: %v", err)
	}
	if context != "" {
		if _, ok := cfg.Contexts[context]; !ok {
			return api.Errorf(api.CodeInvalid, "kubernetes.context", "kubernetes.context %q is not a context of the kubeconfig; it has: %s", context, contextNames(cfg.Contexts))
		}
	} else if cfg.CurrentContext == "" {
		return api.Errorf(api.CodeInvalid, "kubernetes.context", "the kubeconfig has no current-context; set kubernetes.context to one of: %s", contextNames(cfg.Contexts))
	} else if _, ok := cfg.Contexts[cfg.CurrentContext]; !ok {
		return api.Errorf(api.CodeInvalid, field, "the kubeconfig's current-context %q is not one of its contexts (%s); fix the file or set kubernetes.context", cfg.CurrentContext, contextNames(cfg.Contexts))
	}
	if err := clientcmd.ConfirmUsable(*cfg, context); err != nil {
		return api.Errorf(api.CodeInvalid, field, "kubernetes.kubeconfig cannot be used: %v", err)
	}
	return nil
}

func contextNames[V any](m map[string]V) string {
	if len(m) == 0 {
		return "(none)"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// KubeNamespace checks a namespace name (a DNS-1123 label, as Kubernetes requires).
func KubeNamespace(ns string) error {
	if errs := k8svalidation.IsDNS1123Label(ns); len(errs) > 0 {
		return api.Errorf(api.CodeInvalid, "kubernetes.namespace", "kubernetes.namespace %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}

// InstanceTypeName checks an instance type's name: a DNS-1123 label (at most 63 lowercase
// letters, digits and '-', starting and ending with a letter or digit), since it labels pods.
func InstanceTypeName(name string) error {
	if errs := k8svalidation.IsDNS1123Label(name); len(errs) > 0 {
		return api.Errorf(api.CodeInvalid, "kubernetes.instance_types."+name, "instance type name %q is not valid: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// InstanceType checks one instance type: its name, its node selector (label keys and
// values) and its resources.
func InstanceType(name string, it api.InstanceType) error {
	if err := InstanceTypeName(name); err != nil {
		return err
	}
	base := "kubernetes.instance_types." + name
	for _, k := range slices.Sorted(mapKeys(it.NodeSelector)) {
		field := base + ".node_selector." + k
		if errs := k8svalidation.IsQualifiedName(k); len(errs) > 0 {
			return api.Errorf(api.CodeInvalid, field, "%s.node_selector key %q is not a label key: %s", base, k, strings.Join(errs, "; "))
		}
		if errs := k8svalidation.IsValidLabelValue(it.NodeSelector[k]); len(errs) > 0 {
			return api.Errorf(api.CodeInvalid, field, "%s.node_selector value %q of %q is not a label value: %s", base, it.NodeSelector[k], k, strings.Join(errs, "; "))
		}
	}
	if it.Resources == nil {
		return nil
	}
	requests, err := Quantities(base+".resources.requests", it.Resources.Requests)
	if err != nil {
		return err
	}
	limits, err := Quantities(base+".resources.limits", it.Resources.Limits)
	if err != nil {
		return err
	}
	for _, r := range slices.Sorted(mapKeys(requests)) {
		q := requests[r]
		if l, ok := limits[r]; ok && q.Cmp(l) > 0 {
			return api.Errorf(api.CodeInvalid, base+".resources.requests."+r, "%s.resources.requests.%s (%s) is more than its limit (%s); a pod may not request more than its limit", base, r, it.Resources.Requests[r], it.Resources.Limits[r])
		}
	}
	return nil
}

// Quantities parses a map of resource name to Kubernetes quantity ("500m", "4Gi", "1").
func Quantities(field string, m map[string]string) (map[string]resource.Quantity, error) {
	out := make(map[string]resource.Quantity, len(m))
	for _, name := range slices.Sorted(mapKeys(m)) {
		if errs := k8svalidation.IsQualifiedName(name); len(errs) > 0 {
			return nil, api.Errorf(api.CodeInvalid, field+"."+name, "%s: %q is not a resource name such as cpu, memory or nvidia.com/gpu: %s", field, name, strings.Join(errs, "; "))
		}
		q, err := resource.ParseQuantity(m[name])
		if err != nil {
			return nil, api.Errorf(api.CodeInvalid, field+"."+name, "%s.%s = %q is not a Kubernetes quantity such as 500m, 2, 512Mi or 4Gi", field, name, m[name])
		}
		if q.Sign() < 0 {
			return nil, api.Errorf(api.CodeInvalid, field+"."+name, "%s.%s = %q must not be negative", field, name, m[name])
		}
		out[name] = q
	}
	return out, nil
}

// DefaultInstanceType checks that name is one of the instance types.
func DefaultInstanceType(name string, names []string) error {
	if !slices.Contains(names, name) {
		return api.Errorf(api.CodeInvalid, "kubernetes.default_instance_type", "kubernetes.default_instance_type %q is not one of kubernetes.instance_types (%s)", name, strings.Join(names, ", "))
	}
	return nil
}

// JobInstanceType resolves the instance type a job on an attached Kubernetes cluster asks
// for (the cluster's default when empty) and fails naming the ones it has.
func JobInstanceType(k api.Kubernetes, name string) (string, api.InstanceType, error) {
	k = k.WithDefaults()
	if name == "" {
		name = k.DefaultInstanceType
	}
	it, ok := k.InstanceTypes[name]
	if !ok {
		return "", it, api.Errorf(api.CodeInvalid, "instance_type", "instance type %q is not one of this compute's instance types (%s)", name, strings.Join(slices.Sorted(mapKeys(k.InstanceTypes)), ", "))
	}
	return name, it, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
