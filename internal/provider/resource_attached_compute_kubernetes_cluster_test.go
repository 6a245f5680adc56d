//go:build kubernetes

package provider

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	kubedriver "github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/route"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// These tests attach a real Kubernetes cluster: the one `make kube-up` starts (or any
// other), named by KUBECONFIG, with MLCOMPUTE_KUBE_IMAGE an image its nodes have. They
// fail, not skip, without them. Each test works in namespaces of its own, removed at its end.

// kubeDriverForTests builds the node driver of an attached cluster's job pods: package
// kubernetes's driver, as the daemon wires it, under an engine id of the test's own.
var kubeDriverForTests route.NewKubeDriver = func(ctx context.Context, cfg kubedriver.Config) (driver.Driver, error) {
	cfg.EngineID = slurm.NewEngineID()
	return kubedriver.New(ctx, cfg)
}

type testCluster struct {
	kubeconfig string // the admin kubeconfig's content
	image      string
	cs         *k8s.Clientset
}

func realCluster(t *testing.T) *testCluster {
	t.Helper()
	path, image := os.Getenv("KUBECONFIG"), os.Getenv("MLCOMPUTE_KUBE_IMAGE")
	if path == "" || image == "" {
		t.Fatal("these tests need a Kubernetes cluster: run `eval \"$(make -s kube-up)\"` first (it sets KUBECONFIG and MLCOMPUTE_KUBE_IMAGE)")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &testCluster{kubeconfig: string(raw), image: image, cs: cs}
}

// namespace makes a namespace (with its default service account, which a cluster without
// a controller manager does not make) removed when the test ends.
func (tc *testCluster) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	name := prefix + "-" + rand.String(5)
	if _, err := tc.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	_, err := tc.cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

// withCredentials is the admin kubeconfig with its user's credentials replaced by a token.
func (tc *testCluster) withToken(t *testing.T, token string) string {
	t.Helper()
	cfg, err := clientcmd.Load([]byte(tc.kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range cfg.AuthInfos {
		u.ClientCertificate, u.ClientCertificateData, u.ClientKey, u.ClientKeyData = "", nil, "", nil
		u.Username, u.Password, u.TokenFile, u.Token = "", "", "", token
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// serviceAccountToken makes a service account bound to a Role with rules in ns and returns
// a token for it (TokenRequest).
func (tc *testCluster) serviceAccountToken(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	if _, err := tc.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := tc.cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tc.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for service account %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// kubeBlock is an attached Kubernetes compute's body with the kubeconfig in a file.
func kubeBlock(name, kubeconfigFile, lines string) string {
	return fmt.Sprintf(`  name = %q
  kubernetes = {
    kubeconfig = file(%q)
    %s
  }`, name, kubeconfigFile, lines)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "kubeconfig-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return f.Name()
}

func TestAccAttachedCompute_KubernetesCluster(t *testing.T) {
	tc := realCluster(t)
	e, c := testAccEngine(t, enginetest.Options{KubeImage: tc.image})
	ns, ns2 := tc.namespace(t, "mlc-acc"), tc.namespace(t, "mlc-acc2")
	admin := writeFile(t, tc.kubeconfig)
	id := api.ComputeID("lab", "k8s")
	types := `instance_types = {
      small = { node_selector = {}, resources = { requests = { cpu = "100m", memory = "64Mi" }, limits = { cpu = "500m", memory = "128Mi" } } }
      huge  = { resources = { requests = { cpu = "512" } } }
      gpu   = { node_selector = { "nvidia.com/gpu.present" = "true" } }
    }
    default_instance_type = "small"`
	body := func(namespace, desc string) string {
		return kubeBlock("k8s", admin, fmt.Sprintf("namespace = %q\n    %s", namespace, types)) + fmt.Sprintf("\n  description = %q", desc)
	}
	positiveInt := knownvalue.Int64Func(func(v int64) error {
		if v < 1 {
			return fmt.Errorf("vcpus %d", v)
		}
		return nil
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccAttachedDetached(c, "k8s"),
		Steps: []resource.TestStep{
			{
				Config: testAccAttachedConfig(e.Endpoint, body(ns, "first")),
				ConfigStateChecks: []statecheck.StateCheck{
					attachedValue("id", knownvalue.StringExact(id)),
					attachedValue("kubernetes.namespace", knownvalue.StringExact(ns)),
					attachedValue("kubernetes.image", knownvalue.Null()),
					attachedValue("kubernetes.instance_types.small.resources.limits.memory", knownvalue.StringExact("128Mi")),
					attachedValue("virtual_machine", knownvalue.Null()),
					attachedValue("vcpus", positiveInt),
					attachedValue("memory_gb", positive),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check: resource.ComposeTestCheckFunc(
					engineCompute(c, "lab", "k8s", func(got *api.Compute) error {
						if got.Kubernetes == nil || got.Kubernetes.Kubeconfig != "" || len(got.Nodes) != 0 {
							return fmt.Errorf("the engine returned %+v: want the cluster without its kubeconfig and no node", got.Kubernetes)
						}
						return nil
					}),
					unsatisfiableJobsRefused(c),
				),
			},
			{
				// Another namespace, checked again, in place.
				Config:            testAccAttachedConfig(e.Endpoint, body(ns2, "second")),
				ConfigPlanChecks:  updatedInPlace(testAccAttachedAddr),
				ConfigStateChecks: []statecheck.StateCheck{attachedValue("kubernetes.namespace", knownvalue.StringExact(ns2))},
			},
			{
				// Azure's default instance type when none is declared, in place.
				Config:           testAccAttachedConfig(e.Endpoint, kubeBlock("k8s", admin, fmt.Sprintf("namespace = %q", ns2))+"\n  description = \"second\""),
				ConfigPlanChecks: updatedInPlace(testAccAttachedAddr),
				ConfigStateChecks: []statecheck.StateCheck{
					attachedValue("kubernetes.default_instance_type", knownvalue.StringExact("defaultinstancetype")),
					attachedValue("kubernetes.instance_types.defaultinstancetype.resources.requests.cpu", knownvalue.StringExact("100m")),
					attachedValue("kubernetes.instance_types.defaultinstancetype.resources.limits.memory", knownvalue.StringExact("2Gi")),
				},
			},
			{
				ResourceName:                         testAccAttachedAddr,
				ImportState:                          true,
				ImportStateId:                        id,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "id",
				ImportStateVerifyIgnore:              []string{"kubernetes.kubeconfig", "timeouts"},
			},
		},
	})
}

func TestAccAttachedCompute_KubernetesBadInput(t *testing.T) {
	tc := realCluster(t)
	e, c := testAccEngine(t, enginetest.Options{KubeImage: tc.image})
	ns := tc.namespace(t, "mlc-bad")
	podRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"}}}
	noExec := writeFile(t, tc.withToken(t, tc.serviceAccountToken(t, ns, "no-exec", podRules)))
	wrongToken := writeFile(t, tc.withToken(t, "not-a-valid-token"))
	admin := writeFile(t, tc.kubeconfig)
	noCluster := writeFile(t, kubeconfigFor("https://127.0.0.1:1", "t"))
	badCA := writeFile(t, strings.Replace(kubeconfigFor("https://127.0.0.1:1", "t"), "insecure-skip-tls-verify: true", "certificate-authority-data: bm90IGEgY2VydGlmaWNhdGU=", 1))
	config := func(body string) string { return testAccAttachedConfig(e.Endpoint, body) }
	step := func(body string, phrases ...string) resource.TestStep {
		return resource.TestStep{Config: config(body), ExpectError: expectError(phrases...)}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			step(kubeBlock("k8s", noCluster, `namespace = "default"`), "Cannot Attach Kubernetes Cluster", "no Kubernetes API answers at https://127.0.0.1:1"),
			step(kubeBlock("k8s", wrongToken, fmt.Sprintf("namespace = %q", ns)), "Cannot Attach Kubernetes Cluster", "refused the kubeconfig's credentials (401 Unauthorized)"),
			step(kubeBlock("k8s", admin, `namespace = "no-such-namespace"`), "Cannot Attach Kubernetes Cluster", `namespace "no-such-namespace" does not exist`),
			step(kubeBlock("k8s", noExec, fmt.Sprintf("namespace = %q", ns)), "Cannot Attach Kubernetes Cluster",
				"credentials may not create pods/exec in namespace "+fmt.Sprintf("%q", ns)),
			// The last, valid configuration (the final destroy plans with it): a kubeconfig
			// whose certificate authority is not a certificate.
			step(kubeBlock("k8s", badCA, `namespace = "default"`), "Cannot Attach Kubernetes Cluster", "kubeconfig cannot be used"),
		},
		CheckDestroy: func(*terraform.State) error {
			list, err := c.ListComputes(context.Background(), "lab")
			if err == nil && len(list) > 0 {
				return fmt.Errorf("failed attaches left computes behind: %v", list)
			}
			return nil
		},
	})
}

// TestAccAttachedCompute_KubernetesJobPods runs a two-rank job with an instance type on
// the attached cluster: while it runs its pods carry the instance type's requests and
// limits; once it is cancelled, no pod is left.
func TestAccAttachedCompute_KubernetesJobPods(t *testing.T) {
	tc := realCluster(t)
	if kubeDriverForTests == nil {
		t.Fatal("the Kubernetes node driver is not wired into this test binary (kubeDriverForTests)")
	}
	e, c := testAccEngine(t, enginetest.Options{KubeImage: tc.image, NewKubeDriver: kubeDriverForTests})
	ns := tc.namespace(t, "mlc-job")
	admin := writeFile(t, tc.kubeconfig)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccAttachedConfig(e.Endpoint, kubeBlock("k8s", admin, fmt.Sprintf(`namespace = %q
    instance_types = {
      tiny = { resources = { requests = { cpu = "50m", memory = "32Mi" }, limits = { cpu = "250m", memory = "64Mi" } } }
    }
    default_instance_type = "tiny"`, ns))),
			Check: func(*terraform.State) error { return jobPodsCarryResources(c, tc, ns) },
		}},
	})
}

func jobPodsCarryResources(c *client.Client, tc *testCluster, ns string) error {
	ctx := context.Background()
	// A job that ends by itself: its pods go with it.
	done, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "k8s", InstanceCount: 2, Command: []string{"sh", "-c", "echo rank $RANK of $WORLD_SIZE"}})
	if err != nil {
		return err
	}
	if err := waitJob(c, done.ID, api.JobCompleted); err != nil {
		return err
	}
	if err := podsGone(tc, ns); err != nil {
		return fmt.Errorf("after the job completed: %w", err)
	}
	j, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "k8s", InstanceType: "tiny", InstanceCount: 2, Command: []string{"sh", "-c", "sleep 300"}})
	if err != nil {
		return err
	}
	if err := waitJob(c, j.ID, api.JobRunning); err != nil {
		return err
	}
	pods, err := tc.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(pods.Items) != 2 {
		return fmt.Errorf("%d pods in %s while the two-rank job runs; want 2", len(pods.Items), ns)
	}
	for _, p := range pods.Items {
		r := p.Spec.Containers[0].Resources
		if r.Requests.Cpu().String() != "50m" || r.Requests.Memory().String() != "32Mi" || r.Limits.Cpu().String() != "250m" || r.Limits.Memory().String() != "64Mi" {
			return fmt.Errorf("pod %s resources %v; want the instance type tiny's", p.Name, r)
		}
	}
	if _, err := c.CancelJob(ctx, "lab", j.ID); err != nil {
		return err
	}
	if err := podsGone(tc, ns); err != nil {
		return fmt.Errorf("after the job was cancelled: %w", err)
	}
	return nil
}

// podsGone waits (a minute at most) until the namespace holds no pod.
func podsGone(tc *testCluster, ns string) error {
	var left int
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pods, err := tc.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return nil
		}
		if err == nil {
			left = len(pods.Items)
		}
	}
	return fmt.Errorf("%d pods still in %s after a minute", left, ns)
}

// unsatisfiableJobsRefused submits jobs of instance types no node of the cluster can run:
// each is refused with the instance type's name, and nothing is queued.
func unsatisfiableJobsRefused(c *client.Client) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for it, says := range map[string]string{
			"huge": `instance type "huge" requests more than any of its 1 node(s) can give (mlcompute-kube: cpu`,
			"gpu":  `instance type "gpu" cannot run anywhere: no schedulable node of the cluster has the labels of its node_selector nvidia.com/gpu.present=true`,
		} {
			_, err := c.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "k8s", InstanceType: it, Command: []string{"true"}})
			if err == nil || api.FieldOf(err) != "instance_type" || !strings.Contains(err.Error(), says) {
				return fmt.Errorf("--instance-type %s: %v; want an error on instance_type saying %q", it, err, says)
			}
		}
		jobs, err := c.ListJobs(context.Background(), "lab")
		if err != nil || len(jobs) != 0 {
			return fmt.Errorf("refused jobs left %v (%v)", jobs, err)
		}
		return nil
	}
}

// TestKubeNodesDriverChecksPermissionsAtStart: the driver of `mlcompute serve --nodes
// kubernetes` makes the attached clusters' access review when it starts, on a real
// cluster: credentials bound to a Role without pods/exec are refused with the verb named,
// before any node is made; the admin's are accepted. Credentials with pods and pods/exec
// but not pods/ephemeralcontainers start, and the check of tasks in images (which serve
// logs as a warning) names that rule; the admin's pass it. (Here because this file has the
// helpers that make a service account with a Role and a kubeconfig for it.)
func TestKubeNodesDriverChecksPermissionsAtStart(t *testing.T) {
	tc := realCluster(t)
	ns := tc.namespace(t, "mlc-start")
	podRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"}}}
	noExec := writeFile(t, tc.withToken(t, tc.serviceAccountToken(t, ns, "no-exec", podRules)))
	ctx := context.Background()
	_, err := kubedriver.New(ctx, kubedriver.Config{KubeconfigPath: noExec, Namespace: ns, Image: tc.image, EngineID: slurm.NewEngineID()})
	if want := fmt.Sprintf("may not create pods/exec in namespace %q", ns); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("starting with credentials without pods/exec: %v; want an error containing %s", err, want)
	}
	execRules := append(podRules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}})
	noEphemeral := writeFile(t, tc.withToken(t, tc.serviceAccountToken(t, ns, "no-ephemeral", execRules)))
	limited, err := kubedriver.New(ctx, kubedriver.Config{KubeconfigPath: noEphemeral, Namespace: ns, Image: tc.image, EngineID: slurm.NewEngineID()})
	if err != nil {
		t.Fatalf("starting with credentials without pods/ephemeralcontainers: %v; want a start", err)
	}
	defer limited.Close()
	if err := limited.CheckTasksInImages(ctx); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("may not update pods/ephemeralcontainers in namespace %q", ns)) {
		t.Fatalf("the check of tasks in images without pods/ephemeralcontainers: %v; want it named", err)
	}
	d, err := kubedriver.New(ctx, kubedriver.Config{KubeconfigPath: writeFile(t, tc.kubeconfig), Namespace: ns, Image: tc.image, EngineID: slurm.NewEngineID()})
	if err != nil {
		t.Fatalf("starting with the admin's credentials: %v", err)
	}
	defer d.Close()
	if err := d.CheckTasksInImages(ctx); err != nil {
		t.Fatalf("the check of tasks in images with the admin's credentials: %v", err)
	}
}
