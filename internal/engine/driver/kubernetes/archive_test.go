package kubernetes

import (
	"context"
	"errors"
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

// recordingImporter records the imports it is asked for.
type recordingImporter struct {
	mu    sync.Mutex
	calls []importCall
	err   error
}

type importCall struct{ pod, archive, hash, address, namespace string }

func (r *recordingImporter) ImportImage(_ context.Context, sh ssh.Shell, _, archive, hash, address, namespace string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, importCall{pod: sh.(podShell).pod, archive: archive, hash: hash, address: address, namespace: namespace})
	return r.err
}

// archiveEnv is a driver on the fake clientset whose pods run an imported archive, with a
// cordoned node and a ready one; pods the fake creates run at once.
func archiveEnv(t *testing.T, importer ImageImporter) (*Driver, *k8sfake.Clientset, context.Context) {
	t.Helper()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	cs := k8sfake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a-cordoned", Labels: map[string]string{hostnameLabel: "a-cordoned"}},
			Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b-ready", Labels: map[string]string{hostnameLabel: "b-host"}},
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

// The archive is imported once, on a ready node, by a pod of the import image that mounts
// the node's containerd socket, deleted afterwards; the driver's pods are pinned to that
// node and run the imported image.
func TestArchiveImportedOnceAndPodsPinnedToItsNode(t *testing.T) {
	imp := &recordingImporter{}
	d, cs, ctx := archiveEnv(t, imp)
	for _, key := range []string{"n1", "n2"} {
		if _, err := d.Create(ctx, driver.NodeSpec{Key: key, Owner: "ws/kube-j1", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}); err != nil {
			t.Fatalf("Create(%s): %v", key, err)
		}
	}
	if len(imp.calls) != 1 {
		t.Fatalf("imports %+v; want one for the driver", imp.calls)
	}
	c := imp.calls[0]
	if c.archive != "/data/snapshots/s1/image.tar" || c.hash != "h1" || c.namespace != "k8s.io" ||
		c.address != importMount+"/containerd.sock" {
		t.Errorf("import %+v; want the archive and hash, into k8s.io through the mounted default socket", c)
	}
	pods, err := cs.CoreV1().Pods("ml").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes int
	for _, p := range pods.Items {
		if p.Name == c.pod {
			t.Errorf("the import pod %s is still there", p.Name)
			continue
		}
		nodes++
		if p.Spec.Containers[0].Image != "mlcompute.local/env:h1" || p.Spec.NodeSelector[hostnameLabel] != "b-host" {
			t.Errorf("pod %s: image %q, node selector %v; want the imported image on b-host", p.Name, p.Spec.Containers[0].Image, p.Spec.NodeSelector)
		}
	}
	if nodes != 2 {
		t.Errorf("%d node pods; want 2", nodes)
	}
	var created *corev1.Pod
	for _, a := range cs.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			if p := ca.GetObject().(*corev1.Pod); p.Name == c.pod {
				created = p
			}
		}
	}
	if created == nil {
		t.Fatal("no import pod was created")
	}
	spec := created.Spec
	if spec.NodeName != "b-ready" || spec.Containers[0].Image != "node-image" || *spec.Containers[0].SecurityContext.RunAsUser != 0 ||
		spec.Volumes[0].HostPath.Path != "/run/containerd" || *spec.ActiveDeadlineSeconds != importDeadline {
		t.Errorf("import pod spec %+v; want node-image as root on b-ready with /run/containerd mounted and a deadline", spec)
	}
}

// A failed import fails the node's creation, and the next Create tries again; without an
// importer (an engine off Linux) the creation fails for good, saying why.
func TestArchiveImportFailures(t *testing.T) {
	imp := &recordingImporter{err: errors.New("ctr: not an image")}
	d, _, ctx := archiveEnv(t, imp)
	spec := driver.NodeSpec{Key: "n1", Owner: "ws/kube-j1", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}
	if _, err := d.Create(ctx, spec); err == nil || !errors.Is(err, imp.err) {
		t.Fatalf("Create with a failing import: %v; want its error", err)
	}
	imp.err = nil
	if _, err := d.Create(ctx, spec); err != nil || len(imp.calls) != 2 {
		t.Fatalf("Create after the failure: %v, %d imports; want a second import that works", err, len(imp.calls))
	}

	d2, _, ctx2 := archiveEnv(t, nil)
	_, err := d2.Create(ctx2, spec)
	if err == nil || !driver.IsPermanent(err) {
		t.Fatalf("Create without an importer: %v; want a permanent error", err)
	}
}
