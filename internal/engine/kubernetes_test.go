package engine

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/attachcheck"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/attached"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
)

// These tests run the engine (fake clock) with attached Kubernetes clusters whose node
// driver is a fake that records the pods asked for, and whose checks answer from a table:
// the real checks and driver run against a real cluster in the provider's tests.

// kubeChecks answers an attach's checks: access fails with accessErr, capacity is fixed,
// and the instance types in tooBig fit no node.
type kubeChecks struct {
	accessErr error
	capacity  attached.Capacity
	tooBig    map[string]bool
	clusters  []model.KubeCluster
}

// Access answers accessErr as the composition root's checks would (attachcheck.KubeSetting).
func (k *kubeChecks) Access(_ context.Context, c model.KubeCluster) error {
	k.clusters = append(k.clusters, c)
	return attachcheck.KubeSetting(k.accessErr)
}

func (k *kubeChecks) Capacity(context.Context, model.KubeCluster, []driver.PodShape) (attached.Capacity, error) {
	return k.capacity, nil
}

func (k *kubeChecks) InstanceType(_ context.Context, _ model.KubeCluster, s driver.PodShape) error {
	if k.tooBig[s.InstanceType] {
		return errors.New("instance type \"" + s.InstanceType + "\" requests more than any of its 1 node(s) can give")
	}
	return nil
}

type kubeRig struct {
	*rig
	pods    *fake.Driver
	checks  *kubeChecks
	started []kubernetes.Config
}

func newKubeRig(t *testing.T) *kubeRig {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	k := &kubeRig{
		rig:    &rig{t: t, clk: clk, drv: fake.New(clk), path: filepath.Join(t.TempDir(), "state.db")},
		pods:   fake.New(clk),
		checks: &kubeChecks{capacity: attached.Capacity{Listed: true, Nodes: 1, VCPUs: 8, MemoryGB: 31.2}},
	}
	k.configure = func(cfg *Config, e *Engine) {
		if e == nil {
			cfg.KubeImage = "mlcompute/node:test"
			cfg.NewKubeDriver = func(_ context.Context, c kubernetes.Config) (driver.Driver, error) {
				k.started = append(k.started, c)
				k.pods.Reopen()
				return k.pods, nil
			}
			cfg.KubeChecks = k.checks
		}
	}
	k.start()
	t.Cleanup(k.stop)
	k.workspace("lab", nil)
	return k
}

const engineTestKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: ml, user: {token: s3cr3t}}]
contexts: [{name: lab, context: {cluster: lab, user: ml}}]
current-context: lab
`

func (k *kubeRig) attachKube(name string, kc api.Kubernetes) (*api.Compute, error) {
	return k.e.CreateCompute(context.Background(), "lab", api.ComputeSpec{Name: name, Type: api.TypeKubernetes, Kubernetes: &kc}, "")
}

func gpuCluster() api.Kubernetes {
	return api.Kubernetes{Kubeconfig: engineTestKubeconfig, Namespace: "ml", InstanceTypes: map[string]api.InstanceType{
		"gpu": {NodeSelector: map[string]string{"pool": "gpu"}, Resources: &api.PodResources{
			Requests: map[string]string{"cpu": "1", "memory": "4Gi"},
			Limits:   map[string]string{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
		}},
		"cpu": {},
	}, DefaultInstanceType: "cpu"}
}

func TestKubernetesAttachReadsBackWithoutKubeconfig(t *testing.T) {
	k := newKubeRig(t)
	c, err := k.attachKube("k8s", api.Kubernetes{Kubeconfig: engineTestKubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Kubernetes
	if c.Type != api.TypeKubernetes || got == nil || got.Kubeconfig != "" || got.Namespace != "default" ||
		got.DefaultInstanceType != api.DefaultInstanceTypeName || got.VCPUs != 8 || got.MemoryGB != 31.2 {
		t.Fatalf("read back %+v %+v; want type Kubernetes, no kubeconfig, the defaults and the capacity", c, got)
	}
	def := got.InstanceTypes[api.DefaultInstanceTypeName]
	if def.Resources == nil || def.Resources.Requests["cpu"] != "100m" || def.Resources.Limits["memory"] != "2Gi" {
		t.Fatalf("default instance type %+v; want Azure's", def)
	}
	if len(c.Nodes) != 0 || len(k.pods.Nodes()) != 0 || len(k.started) != 0 {
		t.Fatalf("an idle attached cluster holds %d nodes, %d pods, %d drivers; want none", len(c.Nodes), len(k.pods.Nodes()), len(k.started))
	}
}

func TestKubernetesAttachFailureLeavesNothing(t *testing.T) {
	k := newKubeRig(t)
	k.checks.accessErr = &kubernetes.AccessError{Setting: kubernetes.SettingNamespace, Msg: `namespace "ml" does not exist in the cluster`}
	_, err := k.attachKube("k8s", gpuCluster())
	if api.FieldOf(err) != "kubernetes.namespace" || !strings.Contains(err.Error(), `namespace "ml" does not exist`) {
		t.Fatalf("got %v; want an error on kubernetes.namespace", err)
	}
	if _, err := k.e.GetCompute(context.Background(), "lab", "k8s"); !api.IsNotFound(err) {
		t.Fatalf("after a failed attach: %v; want no compute", err)
	}
}

func TestKubernetesJobRunsOnePodPerRankAndKeepsNone(t *testing.T) {
	k := newKubeRig(t)
	if _, err := k.attachKube("k8s", gpuCluster()); err != nil {
		t.Fatal(err)
	}
	j, err := k.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "k8s", InstanceType: "gpu", InstanceCount: 3, Command: []string{"train"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	k.eventuallySSH("job running on three pods", k.status("lab", j.ID, api.JobRunning))
	got := k.job("lab", j.ID)
	if got.Compute != "k8s" || got.InstanceType != "gpu" || len(got.Nodes) != 3 {
		t.Fatalf("job %+v; want compute k8s, instance type gpu, 3 nodes", got)
	}
	for rank, id := range got.Nodes {
		spec, ok := k.pods.Node(id)
		if !ok || !strings.HasPrefix(id, model.KubeNodePrefix) || spec.Pod == nil || spec.Pod.InstanceType != "gpu" ||
			spec.Pod.NodeSelector["pool"] != "gpu" || spec.Pod.Requests["memory"] != "4Gi" || spec.Pod.Limits["nvidia.com/gpu"] != "1" {
			t.Fatalf("rank %d node %s: %+v; want a pod of instance type gpu", rank, id, spec.Pod)
		}
		if task, ok := k.pods.Task(id, k.task("lab", j.ID, rank)); !ok || task.Spec.Env["RANK"] != string(rune('0'+rank)) || task.Spec.Env["WORLD_SIZE"] != "3" {
			t.Fatalf("rank %d task %+v", rank, task.Spec.Env)
		}
	}
	if len(k.started) != 1 || k.started[0].Namespace != "ml" || k.started[0].Image != "mlcompute/node:test" || string(k.started[0].Kubeconfig) != engineTestKubeconfig {
		t.Fatalf("drivers started: %+v; want one for namespace ml with the engine's image", k.started)
	}
	if len(k.drv.Nodes()) != 0 {
		t.Fatalf("the operator's driver got %v; pods belong to the cluster's driver", k.drv.Nodes())
	}
	if c := k.compute("lab", "k8s"); len(c.Nodes) != 0 {
		t.Fatalf("the attached compute shows %d nodes; its jobs' pods are the job's", len(c.Nodes))
	}

	for rank, id := range got.Nodes {
		k.pods.FinishTask(id, k.task("lab", j.ID, rank), 0)
	}
	k.eventuallySSH("job completed and its pods deleted", func() bool {
		return k.job("lab", j.ID).Status == api.JobCompleted && len(k.pods.Nodes()) == 0 && !k.hasKubeJobCompute()
	})
	if deleted := k.pods.CallsTo(fake.MethodTerminate); !sameSet(deleted, got.Nodes) {
		t.Fatalf("terminated %v; want the job's pods %v", deleted, got.Nodes)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), b)
}

func (k *kubeRig) hasKubeJobCompute() bool {
	var found bool
	_ = k.st.View(func(tx *store.Tx) error {
		found = len(tx.Keys(store.Computes, "lab/"+model.KubeJobComputePrefix)) > 0
		return nil
	})
	return found
}

func TestKubernetesJobInstanceTypeErrors(t *testing.T) {
	k := newKubeRig(t)
	if _, err := k.attachKube("k8s", gpuCluster()); err != nil {
		t.Fatal(err)
	}
	k.checks.tooBig = map[string]bool{"gpu": true}
	for _, tc := range []struct{ it, says string }{
		{"tpu", `instance type "tpu" is not one of this compute's instance types (cpu, gpu)`},
		{"gpu", `instance type "gpu" requests more than any of its 1 node(s) can give`},
	} {
		_, err := k.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "k8s", InstanceType: tc.it, Command: []string{"train"}}, "")
		if api.FieldOf(err) != "instance_type" || !strings.Contains(err.Error(), tc.says) {
			t.Fatalf("--instance-type %s: %v; want %q on instance_type", tc.it, err, tc.says)
		}
	}
	if k.hasKubeJobCompute() || len(k.pods.Nodes()) != 0 {
		t.Fatal("a refused job left a compute or a pod")
	}
	// Without --instance-type the job takes the default one.
	j, err := k.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "k8s", Command: []string{"train"}}, "")
	if err != nil || j.InstanceType != "cpu" {
		t.Fatalf("default instance type: %+v %v; want cpu", j, err)
	}
}

func TestKubernetesDeleteCancelsJobsAndDeletesTheirPods(t *testing.T) {
	k := newKubeRig(t)
	if _, err := k.attachKube("k8s", gpuCluster()); err != nil {
		t.Fatal(err)
	}
	j, err := k.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "k8s", InstanceCount: 2, Command: []string{"train"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	k.eventuallySSH("job running", k.status("lab", j.ID, api.JobRunning))
	if err := k.e.DeleteCompute(context.Background(), "lab", "k8s"); err != nil {
		var recs []string
		_ = k.st.View(func(tx *store.Tx) error { recs = tx.Keys(store.Computes, ""); return nil })
		t.Fatalf("%v; computes %v, pods %v", err, recs, k.pods.Nodes())
	}
	if st := k.job("lab", j.ID).Status; st != api.JobCanceled || len(k.pods.Nodes()) != 0 || k.hasKubeJobCompute() {
		t.Fatalf("after delete: job %s, pods %v; want Canceled and no pod", st, k.pods.Nodes())
	}
}

func TestKubernetesUpdateChecksNewConnectionOnly(t *testing.T) {
	k := newKubeRig(t)
	if _, err := k.attachKube("k8s", gpuCluster()); err != nil {
		t.Fatal(err)
	}
	upd := gpuCluster()
	upd.Image = "registry.example.com/ml/train:2"
	if _, err := k.e.UpdateCompute(context.Background(), "lab", "k8s", api.ComputeUpdate{Kubernetes: &upd}); err != nil {
		t.Fatal(err)
	}
	if len(k.checks.clusters) != 1 {
		t.Fatalf("an image change checked the cluster %d more times; want none", len(k.checks.clusters)-1)
	}
	upd.Namespace = "team"
	k.checks.accessErr = &kubernetes.AccessError{Setting: kubernetes.SettingNamespace, Msg: `namespace "team" does not exist in the cluster`}
	if _, err := k.e.UpdateCompute(context.Background(), "lab", "k8s", api.ComputeUpdate{Kubernetes: &upd}); api.FieldOf(err) != "kubernetes.namespace" {
		t.Fatalf("moving to a missing namespace: %v; want an error on kubernetes.namespace", err)
	}
	c := k.compute("lab", "k8s")
	if c.Kubernetes.Namespace != "ml" || c.Kubernetes.Image != "registry.example.com/ml/train:2" {
		t.Fatalf("after a refused update: %+v; want namespace ml kept", c.Kubernetes)
	}
}

// TestKubernetesKubeconfigNeverLogged attaches (refused, then accepted), runs a job,
// updates and deletes an attached cluster with the engine logging at trace level, and
// checks that the kubeconfig's token never reaches the log nor an API read.
func TestKubernetesKubeconfigNeverLogged(t *testing.T) {
	var logs syncbuf.Buffer
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	k := &kubeRig{
		rig:    &rig{t: t, clk: clk, drv: fake.New(clk), path: filepath.Join(t.TempDir(), "state.db")},
		pods:   fake.New(clk),
		checks: &kubeChecks{capacity: attached.Capacity{Listed: true, Nodes: 1, VCPUs: 2, MemoryGB: 4}},
	}
	k.configure = func(cfg *Config, e *Engine) {
		if e != nil {
			return
		}
		cfg.KubeChecks = k.checks
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: &logs})
		cfg.KubeImage = "mlcompute/node:test"
		cfg.NewKubeDriver = func(context.Context, kubernetes.Config) (driver.Driver, error) { return k.pods, nil }
	}
	k.start()
	t.Cleanup(k.stop)
	k.workspace("lab", nil)
	ctx := context.Background()

	k.checks.accessErr = &kubernetes.AccessError{Setting: kubernetes.SettingKubeconfig, Msg: "the Kubernetes API at https://10.0.0.1:6443 refused the kubeconfig's credentials (401 Unauthorized)"}
	if _, err := k.attachKube("k8s", gpuCluster()); err == nil {
		t.Fatal("a refused attach was accepted")
	}
	k.checks.accessErr = nil
	c, err := k.attachKube("k8s", gpuCluster())
	if err != nil {
		t.Fatal(err)
	}
	j, err := k.e.SubmitJob(ctx, "lab", api.JobSpec{Compute: "k8s", Command: []string{"train"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	k.eventuallySSH("job running", k.status("lab", j.ID, api.JobRunning))
	upd := gpuCluster()
	upd.Kubeconfig = strings.Replace(upd.Kubeconfig, "s3cr3t", "s3cr3t-rotated", 1)
	c2, err := k.e.UpdateCompute(ctx, "lab", "k8s", api.ComputeUpdate{Kubernetes: &upd})
	if err != nil {
		t.Fatal(err)
	}
	list, err := k.e.ListComputes(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.e.DeleteCompute(ctx, "lab", "k8s"); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "kubernetes cluster attached") {
		t.Fatalf("the log lacks the attach line, so this test checks nothing:\n%s", out)
	}
	for what, text := range map[string]string{"log": out, "create": c.Kubernetes.Kubeconfig, "update": c2.Kubernetes.Kubeconfig, "list": list[0].Kubernetes.Kubeconfig} {
		if strings.Contains(text, "s3cr3t") || strings.Contains(text, "current-context") {
			t.Errorf("the %s shows the kubeconfig:\n%s", what, text)
		}
	}
}

// A job in a container environment on an attached cluster runs pods of the environment's
// image (a driver of the cluster with that image), its tasks straight in them; a Python
// environment on top of the image is built in the pods, with the image's interpreter.
func TestKubernetesJobInAContainerEnvironmentRunsPodsOfItsImage(t *testing.T) {
	k := newKubeRig(t)
	if _, err := k.attachKube("k8s", gpuCluster()); err != nil {
		t.Fatal(err)
	}
	k.environment("lab", api.EnvironmentSpec{Name: "img", Container: &api.ContainerEnvironment{Image: "registry.example.com/train:1"}})
	k.environment("lab", api.EnvironmentSpec{Name: "on-top", Container: &api.ContainerEnvironment{Image: "registry.example.com/train:2",
		Python: &api.PythonEnvironment{Requirements: []string{"mlctest==0.1"}, FindLinks: []string{"/srv/wheels"}}}})

	j, err := k.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "k8s", Environment: "img", InstanceCount: 1, Command: []string{"train"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	k.eventuallySSH("job running", k.status("lab", j.ID, api.JobRunning))
	node := k.job("lab", j.ID).Nodes[0]
	task, ok := k.pods.Task(node, k.task("lab", j.ID, 0))
	if !ok || task.Spec.Container != nil {
		t.Fatalf("the job's task: %+v; want it to run in the pod, with no container of its own", task.Spec)
	}
	if len(k.started) != 1 || k.started[0].Image != "registry.example.com/train:1" {
		t.Fatalf("drivers started: %+v; want one whose pods are of the environment's image", k.started)
	}
	k.pods.FinishTask(node, k.task("lab", j.ID, 0), 0)
	k.eventuallySSH("job completed", k.status("lab", j.ID, api.JobCompleted))

	j, err = k.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "k8s", Environment: "on-top", InstanceCount: 1, Command: []string{"train"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	k.eventuallySSH("environment building", func() bool { return k.job("lab", j.ID).Reason == "building environment" })
	node = k.job("lab", j.ID).Nodes[0]
	build, ok := k.pods.Task(node, k.envTask("lab", j.ID, 0))
	if !ok || build.Spec.Container != nil || build.Spec.Command[0] != "python3" {
		t.Fatalf("the build: %+v; want python3 run in the pod", build.Spec)
	}
	if len(k.started) != 2 || k.started[1].Image != "registry.example.com/train:2" {
		t.Fatalf("drivers started: %+v; want a second one for the second image", k.started)
	}
}
