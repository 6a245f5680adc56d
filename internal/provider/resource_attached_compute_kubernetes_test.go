package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// The plan-time checks of mlcompute_attached_compute's kubernetes block, and an attach
// to an address where no cluster answers; the attach, update, import and jobs against a
// real cluster are in resource_attached_compute_kubernetes_cluster_test.go (build tag
// kubernetes).

// kubeconfigFor is a kubeconfig for server with a token, in two contexts.
func kubeconfigFor(server, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: ml
  user:
    token: %s
contexts:
- name: lab
  context: {cluster: lab, user: ml}
- name: team
  context: {cluster: lab, user: ml, namespace: team}
current-context: lab
`, server, token)
}

// kubeBody is an attached Kubernetes compute's body: name, and a kubernetes block with
// kubeconfig (a heredoc) and the given further lines.
func kubeBody(name, kubeconfig, lines string) string {
	return fmt.Sprintf(`  name = %q
  kubernetes = {
    kubeconfig = <<-EOT
%s
    EOT
    %s
  }`, name, indent(kubeconfig, "      "), lines)
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

const gpuTypes = `instance_types = {
      gpu = {
        node_selector = { "nvidia.com/gpu.present" = "true" }
        resources = {
          requests = { cpu = "1", memory = "4Gi" }
          limits   = { cpu = "2", memory = "4Gi", "nvidia.com/gpu" = "1" }
        }
      }
    }
    default_instance_type = "gpu"`

func TestAccAttachedCompute_KubernetesPlanChecks(t *testing.T) {
	e, c := testAccEngine(t, enginetest.Options{})
	// Nothing listens on port 1: the last step's attach finds no cluster there.
	kc := kubeconfigFor("https://127.0.0.1:1", "s3cr3t-t0ken")
	config := func(body string) string { return testAccAttachedConfig(e.Endpoint, body) }
	step := func(body string, phrases ...string) resource.TestStep {
		return resource.TestStep{Config: config(body), ExpectError: expectError(phrases...)}
	}
	steps := []resource.TestStep{
		step(`  name = "k8s"`, "Missing Attached Compute Kind", "Neither virtual_machine nor kubernetes is set"),
		step(kubeBody("k8s", kc, "")+"\n  virtual_machine = { address = \"10.0.0.5\", username = \"ml\", password = \"pw\" }",
			"Conflicting Attached Compute Kinds", "Both virtual_machine and kubernetes are set"),
		step(kubeBody("k8s", "clusters: [", ""), "Invalid Kubernetes Settings", "kubernetes.kubeconfig is not a kubeconfig file"),
		step(kubeBody("k8s", strings.Replace(kc, "current-context: lab\n", "", 1), ""),
			"Invalid Kubernetes Settings", "the kubeconfig has no current-context; set kubernetes.context to one of: lab, team"),
		step(kubeBody("k8s", kc, `context = "prod"`), `kubernetes.context "prod" is not a context of the kubeconfig; it has: lab, team`),
		step(kubeBody("k8s", kc, `namespace = "Team_A"`), `kubernetes.namespace "Team_A" is not a namespace name`),
		step(kubeBody("k8s", kc, `image = "busybox latest"`), "kubernetes.image", "without spaces"),
		step(kubeBody("k8s", kc, strings.Replace(gpuTypes, "gpu = {", "GPU_big = {", 1)), `instance type name "GPU_big" is not valid`),
		step(kubeBody("k8s", kc, strings.Replace(gpuTypes, `memory = "4Gi" }`, `memory = "4 GB" }`, 1)),
			`kubernetes.instance_types.gpu.resources.requests.memory = "4 GB" is not a Kubernetes quantity`),
		step(kubeBody("k8s", kc, strings.Replace(gpuTypes, `requests = { cpu = "1"`, `requests = { cpu = "3"`, 1)),
			"kubernetes.instance_types.gpu.resources.requests.cpu (3) is more than its limit (2)"),
		step(kubeBody("k8s", kc, strings.Replace(gpuTypes, `"nvidia.com/gpu.present" = "true"`, `"nvidia.com/gpu.present" = "yes please"`, 1)),
			`is not a label value`),
		step(kubeBody("k8s", kc, strings.Replace(gpuTypes, `default_instance_type = "gpu"`, `default_instance_type = "cpu"`, 1)),
			`kubernetes.default_instance_type "cpu" is not one of kubernetes.instance_types (gpu)`),
		step(kubeBody("k8s", kc, `instance_types = {}`), "kubernetes.instance_types is empty", "leave instance_types out for the default one"),
		step(kubeBody("k8s", kc, `default_instance_type = "gpu"`),
			`kubernetes.default_instance_type "gpu" is not one of kubernetes.instance_types (defaultinstancetype)`),
		// At apply: a certificate authority that is not a certificate.
		step(kubeBody("k8s", strings.Replace(kc, "insecure-skip-tls-verify: true", "certificate-authority-data: bm90IGEgY2VydGlmaWNhdGU=", 1), `image = "busybox"`),
			"Cannot Attach Kubernetes Cluster", "the kubeconfig cannot be used: unable to load root certificates"),
		// Last, a valid configuration (the test's final destroy plans with it): the attach
		// finds no cluster at the address and records nothing.
		step(kubeBody("k8s", kc, `image = "busybox"`), "Cannot Attach Kubernetes Cluster", "no Kubernetes API answers at https://127.0.0.1:1"),
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    steps,
		CheckDestroy: func(*terraform.State) error {
			// The workspace goes with the destroy, so computes left behind would block it.
			list, err := c.ListComputes(context.Background(), "lab")
			if err == nil && len(list) > 0 {
				return fmt.Errorf("failed attaches left computes behind: %v", list)
			}
			return nil
		},
	})
}
