//go:build kubernetes

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
)

// The Kubernetes end-to-end tests run `mlcompute serve --nodes kubernetes` against a real
// cluster: KUBECONFIG names it and MLCOMPUTE_KUBE_IMAGE is an image its node has
// (eval "$(make -s kube-up)" sets both). They fail without them.

// kubeRequestScale lets the test machine's one small node hold several VM-size pods.
const kubeRequestScale = "0.05"

func requireKube(t *testing.T) k8s.Interface {
	t.Helper()
	if os.Getenv("KUBECONFIG") == "" || os.Getenv(kubernetes.ImageEnv) == "" {
		t.Fatalf("the kubernetes tests need a cluster: set KUBECONFIG and %s (eval \"$(make -s kube-up)\")", kubernetes.ImageEnv)
	}
	cs, _, err := kubernetes.Config{}.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// kubeUser is a user whose engine makes its nodes pods.
func kubeUser(t *testing.T) *user {
	u := newUser(t)
	u.env = append(u.env, kubernetes.RequestScaleEnv+"="+kubeRequestScale)
	return u
}

// enginePods lists the pods of this user's engine (by its label), by node key.
func (u *user) enginePods(cs k8s.Interface) map[string]corev1.Pod {
	u.t.Helper()
	l, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: kubernetes.LabelEngine + "=" + u.engineID()})
	if err != nil {
		u.t.Fatalf("listing pods: %v", err)
	}
	pods := map[string]corev1.Pod{}
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			pods[p.Annotations[kubernetes.AnnotationNode]] = p
		}
	}
	return pods
}

func podKeys(pods map[string]corev1.Pod) []string {
	var keys []string
	for k := range pods {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (u *user) nodeIDs(compute string) []string {
	var ids []string
	for _, n := range u.compute(compute).Nodes {
		ids = append(ids, n.ID)
	}
	slices.Sort(ids)
	return ids
}

var kubeClusterConfig = requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "e2e-team"
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count                       = 0
    max_node_count                       = 3
    scale_down_nodes_after_idle_duration = "PT15S"
  }
}

resource "mlcompute_compute_cluster" "steady" {
  name         = "steady"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count                       = 1
    max_node_count                       = 1
    scale_down_nodes_after_idle_duration = "PT3S"
  }
}
`

// TestE2E_KubeCluster: with nodes as pods, a 3-pod job gets its ranks and rank 0's pod IP
// as MASTER_ADDR; the cluster goes back to 0 pods after its idle time; a minimum of 1 is
// one pod across an engine SIGKILL (an orphan pod is deleted, none is duplicated); a pod
// deleted by hand is replaced; destroy leaves no pod.
func TestE2E_KubeCluster(t *testing.T) {
	t.Parallel()
	cs := requireKube(t)
	u := kubeUser(t)
	u.startServe("--nodes", "kubernetes")
	u.writeConfig(kubeClusterConfig)
	u.mustTerraform("apply", "-auto-approve")
	u.waitFor("the steady cluster's pod", 2*time.Minute, func() bool { return len(u.enginePods(cs)) == 1 })
	if out, _ := u.cli("status", "-o", "json"); !strings.Contains(out, `"kubernetes"`) {
		t.Fatalf("status -o json does not name the kubernetes driver:\n%s", out)
	}

	// A 3-pod job from 0: ranks 0..2, MASTER_ADDR rank 0's pod IP.
	// The pod's IP from the /etc/hosts line the kubelet writes for it.
	script := `echo "rank $RANK of $WORLD_SIZE master $MASTER_ADDR ip $(awk -v h="$(hostname)" '$2 == h {print $1; exit}' /etc/hosts)"`
	start := time.Now()
	out, exit := u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--instance-count", "3", "--stream", "--", "sh", "-c", script)
	if exit != 0 {
		t.Fatalf("job submit --stream: exit %d:\n%s", exit, out)
	}
	t.Logf("3-pod job from 0 pods done in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	id := jobIDOf(t, out)
	cpuPods := func() int {
		n := 0
		for _, p := range u.enginePods(cs) {
			if strings.HasPrefix(p.Annotations[kubernetes.AnnotationOwner], "e2e-team/cpu") {
				n++
			}
		}
		return n
	}
	// The three nodes stay, idle, for the compute's idle time (15 s) after the job.
	ended := u.nodesStayIdle("e2e-team", id, 15*time.Second, 3, cpuPods)
	line := regexp.MustCompile(`rank (\d) of 3 master (\S+) ip (\S+)`)
	ips := map[string]bool{}
	var master, rank0 string
	for rank := range 3 {
		logs, _ := u.cli("job", "logs", "--workspace", "e2e-team", "--rank", fmt.Sprint(rank), id)
		m := line.FindStringSubmatch(logs)
		if m == nil || m[1] != fmt.Sprint(rank) {
			t.Fatalf("rank %d's output has no rank line:\n%s", rank, logs)
		}
		if master == "" {
			master = m[2]
		} else if m[2] != master {
			t.Fatalf("ranks disagree on MASTER_ADDR: %s and %s", master, m[2])
		}
		if rank == 0 {
			rank0 = m[3]
		}
		ips[m[3]] = true
	}
	if master != rank0 || len(ips) != 3 {
		t.Fatalf("MASTER_ADDR %s, rank 0's pod IP %s, pod IPs %v: want MASTER_ADDR = rank 0's IP and three pods", master, rank0, ips)
	}

	// Idle scale-down: the pods go after the idle deadline.
	deadline := ended.Add(15 * time.Second)
	u.waitFor("the idle pods gone", 60*time.Second, func() bool { return cpuPods() == 0 })
	t.Logf("idle scale-down: the last pod was gone %s after the idle deadline", time.Since(deadline).Round(time.Millisecond))

	// SIGKILL the engine; an orphan pod (made but never recorded) appears meanwhile.
	steady := u.nodeIDs("steady")
	if len(steady) != 1 {
		t.Fatalf("steady has nodes %v; want 1", steady)
	}
	pid := u.enginePID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	u.waitGone(pid, 10*time.Second)
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        kubernetes.PodName(u.engineID(), "node-orphan"),
			Labels:      map[string]string{kubernetes.LabelEngine: u.engineID(), kubernetes.LabelNode: "node-orphan"},
			Annotations: map[string]string{kubernetes.AnnotationEngine: u.engineID(), kubernetes.AnnotationNode: "node-orphan", kubernetes.AnnotationOwner: "e2e-team/steady"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: os.Getenv(kubernetes.ImageEnv), ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"}}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(context.Background(), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u.startServe("--nodes", "kubernetes")
	u.waitFor("the orphan pod deleted", 60*time.Second, func() bool {
		_, ok := u.enginePods(cs)["node-orphan"]
		return !ok
	})
	if got := podKeys(u.enginePods(cs)); !slices.Equal(got, steady) || !slices.Equal(u.nodeIDs("steady"), steady) {
		t.Fatalf("after the restart the engine's pods are %v and steady's nodes %v; want the one node %v", got, u.nodeIDs("steady"), steady)
	}

	// A pod deleted by hand: the node is lost and replaced by a new pod. (The compute's
	// error that says so clears once the replacement is ready.)
	if err := cs.CoreV1().Pods("default").Delete(context.Background(), kubernetes.PodName(u.engineID(), steady[0]), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u.waitFor("a replacement node idle", 2*time.Minute, func() bool {
		for _, n := range u.compute("steady").Nodes {
			if n.ID != steady[0] && n.State == api.NodeIdle {
				return true
			}
		}
		return false
	})
	u.waitFor("one pod, the replacement's", 60*time.Second, func() bool {
		keys := podKeys(u.enginePods(cs))
		return len(keys) == 1 && keys[0] != steady[0]
	})

	u.mustTerraform("destroy", "-auto-approve")
	u.waitFor("no pod left", 60*time.Second, func() bool { return len(u.enginePods(cs)) == 0 })
}

func errorsMention(c api.Compute, s string) bool {
	for _, e := range c.Errors {
		if strings.Contains(e.Message, s) {
			return true
		}
	}
	return false
}

var kubeUnschedulableConfig = requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "e2e-team"
}

resource "mlcompute_compute_cluster" "huge" {
  name         = "huge"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_F72s_v2"
  scale_settings = {
    min_node_count = 1
    max_node_count = 1
  }
}
`

// TestE2E_KubeUnschedulable: a VM size bigger than the cluster's node waits with the
// scheduler's message in the compute's errors, and after --kube-start-timeout its pod is
// deleted and the errors say why.
func TestE2E_KubeUnschedulable(t *testing.T) {
	t.Parallel()
	cs := requireKube(t)
	u := newUser(t) // no request scale: the size asks for 72 vCPUs
	u.startServe("--nodes", "kubernetes", "--kube-start-timeout", "15s")
	u.writeConfig(kubeUnschedulableConfig)
	u.mustTerraform("apply", "-auto-approve")
	// The scheduler's message reaches the errors as soon as the watch sees it, then the
	// start timeout deletes the pod and says so.
	u.waitFor("the compute's errors give the scheduler's message", 2*time.Minute, func() bool {
		return errorsMention(u.compute("huge"), "Insufficient cpu")
	})
	u.waitFor("the compute's errors give the start timeout", 2*time.Minute, func() bool {
		return errorsMention(u.compute("huge"), "not running within the start timeout")
	})
	c := u.compute("huge")
	t.Logf("errors: %s", c.Errors[0].Message)
	u.mustTerraform("destroy", "-auto-approve")
	u.waitFor("no pod left", 60*time.Second, func() bool { return len(u.enginePods(cs)) == 0 })
}

// TestE2E_KubeBadInput: serve refuses a cluster it cannot use with an error that says why.
func TestE2E_KubeBadInput(t *testing.T) {
	t.Parallel()
	requireKube(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nowhere := write("nowhere", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: x}}]
current-context: c
`)
	bad := write("bad", "this is: [not a kubeconfig")
	_, rc, err := kubernetes.Config{}.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	wrong := write("wrong", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: wrong}}]
current-context: c
`, rc.Host))
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"no cluster at the address", []string{"--kube-config", nowhere}, "does not answer"},
		{"a bad kubeconfig", []string{"--kube-config", bad}, "reading the kubeconfig"},
		{"wrong credentials", []string{"--kube-config", wrong}, "refused the kubeconfig's credentials"},
		{"a missing kubeconfig", []string{"--kube-config", filepath.Join(dir, "missing")}, "reading the kubeconfig"},
		{"a missing namespace", []string{"--kube-namespace", "no-such-namespace"}, `namespace "no-such-namespace" does not exist`},
		{"kube flags without --nodes kubernetes", []string{"--nodes", "local", "--kube-namespace", "x"}, "add --nodes kubernetes"},
		{"an unknown driver", []string{"--nodes", "nomad"}, "use local, slurm or kubernetes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home, err := os.MkdirTemp("", "mlc-e2e-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(home)
			args := append([]string{"serve"}, c.flags...)
			if !slices.Contains(c.flags, "--nodes") {
				args = append(args, "--nodes", "kubernetes")
			}
			cmd := exec.Command(filepath.Join(binDir, "mlcompute"), args...)
			cmd.Env = append(os.Environ(), "MLCOMPUTE_HOME="+home)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan struct{})
			var out []byte
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				_ = cmd.Process.Kill()
				t.Fatal("serve did not exit")
			}
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Fatalf("serve %v: %v; want an error with %q:\n%s", c.flags, err, c.want, out)
			}
		})
	}
}

// kubeScorer is a scoring server for the node image (python3 alone): it answers every GET
// (the probes) and every POST with its deployment's name, on 0.0.0.0:$PORT so that the
// engine reaches it at the pod's IP.
const kubeScorer = `import http.server, json, os
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, body):
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
    def do_GET(self):
        self.reply({"ok": True})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.reply({"deployment": os.environ["SCORER_NAME"], "pid": os.getpid()})
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()
`

// TestE2E_KubeEndpoint: an endpoint with two deployments whose instances are pods serves
// its traffic split, reached at the pods' IPs; deleting it leaves no pod.
func TestE2E_KubeEndpoint(t *testing.T) {
	t.Parallel()
	cs := requireKube(t)
	u := kubeUser(t)
	u.startServe("--nodes", "kubernetes")
	u.writeConfig(requiredProviders + "provider \"mlcompute\" {}\nresource \"mlcompute_workspace\" \"ws\" {\n  name = \"e2e-serving\"\n}\n")
	u.mustTerraform("apply", "-auto-approve")
	ctx := context.Background()
	// The probes leave python3 room to start in a pod on a loaded machine: a liveness probe
	// that fails 3 times a second apart restarts a scorer still importing its modules, as
	// Kubernetes' own would (30 s here).
	probe := &api.Probe{Path: "/health", InitialDelay: "PT0S", Period: "PT1S", Timeout: "PT1S", SuccessThreshold: 1, FailureThreshold: 30}
	dep := func(name string) api.DeploymentSpec {
		return api.DeploymentSpec{
			InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: []string{"python3", "-c", kubeScorer},
			EnvironmentVariables: map[string]string{"SCORER_NAME": name},
			RequestSettings:      &api.RequestSettings{RequestTimeoutMS: 5000, MaxConcurrentRequestsPerInstance: 16},
			LivenessProbe:        probe, ReadinessProbe: probe,
		}
	}
	ep, err := u.client().CreateEndpoint(ctx, "e2e-serving", api.EndpointSpec{
		Name:        "split",
		Deployments: map[string]api.DeploymentSpec{"blue": dep("blue"), "green": dep("green")},
		Traffic:     map[string]int64{"blue": 70, "green": 30},
	})
	if err != nil {
		t.Fatal(err)
	}
	u.waitEndpoint("e2e-serving", "split", api.ProvisioningSucceeded)
	if pods := u.enginePods(cs); len(pods) != 2 {
		t.Fatalf("the endpoint's two instances are %d pods; want 2", len(pods))
	}
	keys, err := u.client().GetEndpointKeys(ctx, "e2e-serving", "split")
	if err != nil {
		t.Fatal(err)
	}
	results := load(t, 400, 8, ep.ScoringURI, keys.PrimaryKey, nil)
	counts := map[string]int{}
	for _, r := range results {
		if r.status != 200 {
			t.Fatalf("a request of the split got %d: %s", r.status, r.body)
		}
		counts[r.deployment]++
	}
	tolerance := 4.5 * math.Sqrt(400*0.7*0.3)
	if counts["blue"]+counts["green"] != 400 || math.Abs(float64(counts["blue"])-280) > tolerance {
		t.Fatalf("split %v; want blue within %.0f of 280", counts, tolerance)
	}
	t.Logf("70/30 split over 400 requests to pods: %v", counts)
	if err := u.client().DeleteEndpoint(ctx, "e2e-serving", "split"); err != nil {
		t.Fatal(err)
	}
	u.waitFor("no pod left", 90*time.Second, func() bool { return len(u.enginePods(cs)) == 0 })
	u.mustTerraform("destroy", "-auto-approve")
}

// TestE2E_KubeEnvironment: a job in a system-managed environment on pods: the
// environment (a virtual environment with no requirements: the cluster's node has no
// package index to reach, and pip trusts plain HTTP only from loopback) builds inside the
// pod, in its /mlcompute/envs, and the job runs in it.
func TestE2E_KubeEnvironment(t *testing.T) {
	t.Parallel()
	cs := requireKube(t)
	u := kubeUser(t)
	u.startServe("--nodes", "kubernetes")
	u.writeConfig(requiredProviders + fmt.Sprintf(`
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = %q
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    max_node_count                       = 1
    scale_down_nodes_after_idle_duration = "PT0S"
  }
}

resource "mlcompute_environment" "bare" {
  name         = "bare"
  workspace_id = mlcompute_workspace.ws.id
  python       = { requirements = [] }
}
`, envWorkspace))
	u.mustTerraform("apply", "-auto-approve")
	id := u.envJob("cpu", "bare", "python", "-c", `import sys; print("python in", sys.prefix)`)
	job, log := u.finished(id, 3*time.Minute)
	if job.Status != api.JobCompleted || !strings.Contains(log, "python in /mlcompute/envs/") || !strings.Contains(log, "mlcompute: building environment") {
		t.Fatalf("job %s (%s); want the environment built in the pod's /mlcompute/envs and the job run in it:\n%s", job.Status, job.Error, log)
	}
	u.mustTerraform("destroy", "-auto-approve")
	u.waitFor("no pod left", 60*time.Second, func() bool { return len(u.enginePods(cs)) == 0 })
}
