package kubernetes

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
)

// recordingImporter records the imports it is asked for, with the node of each import
// pod, and fails those on the nodes in fail.
type recordingImporter struct {
	mu    sync.Mutex
	calls []importCall
	fail  map[string]error
}

type importCall struct{ node, pod, archive, hash, address, namespace string }

func (r *recordingImporter) ImportImage(ctx context.Context, sh ssh.Shell, _, archive, hash, address, namespace string) error {
	ps := sh.(podShell)
	pod, err := ps.d.cs.CoreV1().Pods(ps.d.cfg.Namespace).Get(ctx, ps.pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, importCall{node: pod.Spec.NodeName, pod: ps.pod, archive: archive, hash: hash, address: address, namespace: namespace})
	return r.fail[pod.Spec.NodeName]
}

// importsOn counts the imports on each node.
func (r *recordingImporter) importsOn() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for _, c := range r.calls {
		n[c.node]++
	}
	return n
}

// archiveEnv is a driver on the fake clientset whose pods run an imported archive, with a
// cordoned node and two ready ones; pods the fake creates run at once.
func archiveEnv(t *testing.T, importer ImageImporter) (*Driver, *k8sfake.Clientset, context.Context) {
	t.Helper()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	cs := k8sfake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a-cordoned", Labels: map[string]string{hostnameLabel: "a-cordoned"}},
			Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b-ready", Labels: map[string]string{hostnameLabel: "b-host"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c-ready", Labels: map[string]string{hostnameLabel: "c-host"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}},
	)
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.Status.Phase = corev1.PodRunning
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cfg := Config{EngineID: "mlc-test", Namespace: "ml", Image: "mlcompute.local/env:h1", StartTimeout: time.Minute,
		Clock:   clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Archive: &ImageArchive{Path: "/data/snapshots/s1/image.tar", Hash: "h1", ImportImage: "node-image"}, Importer: importer}
	d, err := start(ctx, cfg, cs, &rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, cs, ctx
}

// podHosts is the host names a pod is pinned to by node affinity.
func podHosts(p *corev1.Pod) []string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil {
		return nil
	}
	var hosts []string
	for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == hostnameLabel && e.Operator == corev1.NodeSelectorOpIn {
				hosts = append(hosts, e.Values...)
			}
		}
	}
	return hosts
}

// nodePods are the driver's node pods (not the import pods), by name.
func nodePods(t *testing.T, ctx context.Context, cs *k8sfake.Clientset) map[string]*corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods("ml").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i, p := range pods.Items {
		if p.Labels[LabelNode] != "" {
			out[p.Name] = &pods.Items[i]
		}
	}
	return out
}

// The archive is imported once on each ready node (not the cordoned one), by a pod of the
// import image that mounts the node's containerd socket, deleted afterwards; the driver's
// pods run the imported image and may run on any of those nodes, the scheduler choosing.
func TestArchiveImportedOnEveryReadyNodeAndPodsPinnedToThem(t *testing.T) {
	imp := &recordingImporter{}
	d, cs, ctx := archiveEnv(t, imp)
	for _, key := range []string{"n1", "n2"} {
		if _, err := d.Create(ctx, driver.NodeSpec{Key: key, Owner: "ws/kube-j1", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}); err != nil {
			t.Fatalf("Create(%s): %v", key, err)
		}
	}
	if got := imp.importsOn(); len(got) != 2 || got["b-ready"] != 1 || got["c-ready"] != 1 {
		t.Fatalf("imports per node %v; want one on each ready node", got)
	}
	for _, c := range imp.calls {
		if c.archive != "/data/snapshots/s1/image.tar" || c.hash != "h1" || c.namespace != "k8s.io" ||
			c.address != importMount+"/containerd.sock" {
			t.Errorf("import %+v; want the archive and hash, into k8s.io through the mounted default socket", c)
		}
	}
	pods := nodePods(t, ctx, cs)
	if len(pods) != 2 {
		t.Fatalf("%d node pods; want 2", len(pods))
	}
	for name, p := range pods {
		if hosts := podHosts(p); p.Spec.Containers[0].Image != "mlcompute.local/env:h1" || !slices.Equal(hosts, []string{"b-host", "c-host"}) {
			t.Errorf("pod %s: image %q, hosts %v; want the imported image on b-host and c-host", name, p.Spec.Containers[0].Image, hosts)
		}
	}
	all, err := cs.CoreV1().Pods("ml").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 2 {
		t.Errorf("%d pods; want the 2 node pods, the import pods deleted", len(all.Items))
	}
	var created *corev1.Pod
	for _, a := range cs.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			if p := ca.GetObject().(*corev1.Pod); p.Name == imp.calls[0].pod {
				created = p
			}
		}
	}
	if created == nil {
		t.Fatal("no import pod was created")
	}
	spec := created.Spec
	if spec.NodeName != imp.calls[0].node || spec.Containers[0].Image != "node-image" || *spec.Containers[0].SecurityContext.RunAsUser != 0 ||
		spec.Volumes[0].HostPath.Path != "/run/containerd" || *spec.ActiveDeadlineSeconds != importDeadline {
		t.Errorf("import pod spec %+v; want node-image as root on its node with /run/containerd mounted and a deadline", spec)
	}
}

// A node whose import fails is left out of the pod's choice and tried again for the next
// pod; when every import fails the node's creation fails with the error, and the next
// Create tries again; without an importer (an engine off Linux) the creation fails for
// good, saying why.
func TestArchiveImportFailures(t *testing.T) {
	notAnImage := errors.New("ctr: not an image")
	imp := &recordingImporter{fail: map[string]error{"c-ready": notAnImage}}
	d, cs, ctx := archiveEnv(t, imp)
	spec := driver.NodeSpec{Key: "n1", Owner: "ws/kube-j1", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}
	if _, err := d.Create(ctx, spec); err != nil {
		t.Fatalf("Create with one node's import failing: %v", err)
	}
	if hosts := podHosts(nodePods(t, ctx, cs)[PodName("mlc-test", "n1")]); !slices.Equal(hosts, []string{"b-host"}) {
		t.Fatalf("pod hosts %v; want only the node that holds the image", hosts)
	}
	imp.mu.Lock()
	imp.fail = nil
	imp.mu.Unlock()
	spec.Key = "n2"
	if _, err := d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got := imp.importsOn(); got["b-ready"] != 1 || got["c-ready"] != 2 {
		t.Fatalf("imports per node %v; want the failed node tried again, the other not", got)
	}
	if hosts := podHosts(nodePods(t, ctx, cs)[PodName("mlc-test", "n2")]); !slices.Equal(hosts, []string{"b-host", "c-host"}) {
		t.Fatalf("second pod's hosts %v; want both nodes", hosts)
	}

	imp2 := &recordingImporter{fail: map[string]error{"b-ready": notAnImage, "c-ready": notAnImage}}
	d2, _, ctx2 := archiveEnv(t, imp2)
	spec.Key = "n1"
	if _, err := d2.Create(ctx2, spec); err == nil || !errors.Is(err, notAnImage) {
		t.Fatalf("Create with every import failing: %v; want the import's error", err)
	}
	imp2.mu.Lock()
	imp2.fail = nil
	imp2.mu.Unlock()
	if _, err := d2.Create(ctx2, spec); err != nil || len(imp2.importsOn()) != 2 {
		t.Fatalf("Create after the failures: %v, imports %v; want imports that work", err, imp2.importsOn())
	}

	d3, _, ctx3 := archiveEnv(t, nil)
	_, err := d3.Create(ctx3, spec)
	if err == nil || !driver.IsPermanent(err) {
		t.Fatalf("Create without an importer: %v; want a permanent error", err)
	}
}
