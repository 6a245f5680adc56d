package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// These tests run the driver's logic against client-go's fake clientset (an object store
// with watches, no kubelet): pods change state because the test writes their status.
// The real cluster's tests are in the files tagged kubernetes.

type fakeEnv struct {
	t     *testing.T
	cs    *k8sfake.Clientset
	clock *clocktesting.FakeClock
	d     *Driver
	ctx   context.Context
}

func newFakeEnv(t *testing.T) *fakeEnv {
	t.Helper()
	e := &fakeEnv{t: t, cs: k8sfake.NewClientset(), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	e.ctx = ctx
	e.d = e.start()
	return e
}

func (e *fakeEnv) start() *Driver {
	e.t.Helper()
	d, err := start(e.ctx, Config{EngineID: "mlc-test", Namespace: "ml", Image: "img", StartTimeout: time.Minute, Clock: e.clock}, e.cs, &rest.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = d.Close() })
	return d
}

func (e *fakeEnv) create(key, owner string) driver.NodeInfo {
	e.t.Helper()
	info, err := e.d.Create(e.ctx, driver.NodeSpec{Key: key, Owner: owner, VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14})
	if err != nil {
		e.t.Fatalf("Create(%s): %v", key, err)
	}
	return info
}

func (e *fakeEnv) pods() []corev1.Pod {
	e.t.Helper()
	l, err := e.cs.CoreV1().Pods("ml").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

// setStatus writes a pod's status as a kubelet or scheduler would.
func (e *fakeEnv) setStatus(key string, edit func(*corev1.PodStatus)) {
	e.t.Helper()
	pod, err := e.cs.CoreV1().Pods("ml").Get(e.ctx, e.d.podName(key), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	edit(&pod.Status)
	if _, err := e.cs.CoreV1().Pods("ml").UpdateStatus(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func running(ip string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase, s.PodIP = corev1.PodRunning, ip
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
}

// event waits for the driver's next event (bounded in real time only so that a broken
// driver fails instead of hanging).
func (e *fakeEnv) event() driver.Event {
	e.t.Helper()
	select {
	case ev := <-e.d.Events():
		return ev
	case <-time.After(10 * time.Second):
		e.t.Fatal("no event within 10s")
	}
	return driver.Event{}
}

// describeUntil waits for Describe to say what ok wants: the watch's cache follows the
// API's writes asynchronously.
func (e *fakeEnv) describeUntil(key string, ok func(driver.NodeInfo, error) bool) (driver.NodeInfo, error) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := e.d.Describe(e.ctx, key)
		if ok(info, err) || time.Now().After(deadline) {
			return info, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFakeCreateIsIdempotentAndListsByOwner(t *testing.T) {
	e := newFakeEnv(t)
	a := e.create("n1", "ws/cpu")
	b := e.create("n1", "ws/cpu")
	e.create("n2", "ws/gpu")
	if a.Ready || a.Address != b.Address || a.Owner != "ws/cpu" {
		t.Fatalf("Create twice: %+v then %+v", a, b)
	}
	if n := len(e.pods()); n != 2 {
		t.Fatalf("%d pods after three Creates of two keys, want 2", n)
	}
	var got []string
	for range 100 {
		nodes, err := e.d.List(e.ctx, "ws/cpu")
		if err != nil {
			t.Fatal(err)
		}
		if got = nil; len(nodes) > 0 {
			for _, n := range nodes {
				got = append(got, n.Key)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != 1 || got[0] != "n1" {
		t.Fatalf("List(ws/cpu) = %v, want [n1]", got)
	}
}

func TestFakeReadinessAndPendingReason(t *testing.T) {
	e := newFakeEnv(t)
	e.create("n1", "ws/cpu")
	e.setStatus("n1", func(s *corev1.PodStatus) {
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	})
	info, _ := e.describeUntil("n1", func(i driver.NodeInfo, _ error) bool { return strings.HasPrefix(i.Reason, "Unschedulable") })
	if info.Ready || info.Reason != "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu." {
		t.Fatalf("Describe of an unschedulable pod: %+v", info)
	}
	// The engine hears of it at once: NodeWaiting with the scheduler's message.
	if ev := e.event(); ev.Kind != driver.NodeWaiting || ev.NodeKey != "n1" || ev.Reason != info.Reason {
		t.Fatalf("event %+v, want NodeWaiting of n1 with %q", ev, info.Reason)
	}
	err := e.d.StartTask(e.ctx, "n1", driver.TaskSpec{Key: "t", Command: []string{"true"}})
	if !driver.IsTransient(err) || !strings.Contains(err.Error(), "Unschedulable") {
		t.Fatalf("StartTask on a pending node: %v, want a transient error with the reason", err)
	}
	e.setStatus("n1", running("10.88.0.9"))
	if ev := e.event(); ev.Kind != driver.NodeReady || ev.NodeKey != "n1" {
		t.Fatalf("event %+v, want NodeReady of n1", ev)
	}
	info, err = e.d.Describe(e.ctx, "n1")
	if err != nil || !info.Ready || info.Address != "10.88.0.9" || info.Reason != "" {
		t.Fatalf("Describe after NodeReady: %+v, %v; want ready at the pod IP", info, err)
	}
}

func TestFakeStartTimeoutDeletesThePod(t *testing.T) {
	e := newFakeEnv(t)
	e.create("n1", "ws/cpu")
	e.clock.Step(59 * time.Second)
	if n := len(e.pods()); n != 1 {
		t.Fatalf("%d pods before the start timeout, want 1", n)
	}
	e.clock.Step(time.Second)
	ev := e.event()
	if ev.Kind != driver.NodeGone || ev.NodeKey != "n1" || !strings.Contains(ev.Reason, "not running within the start timeout (1m0s)") {
		t.Fatalf("event %+v, want NodeGone of n1 for the start timeout", ev)
	}
	if n := len(e.pods()); n != 0 {
		t.Fatalf("%d pods after the start timeout, want 0 (deleted)", n)
	}
	if _, err := e.describeUntil("n1", func(_ driver.NodeInfo, err error) bool { return err != nil }); !driver.IsNotFound(err) {
		t.Fatalf("Describe after the start timeout: %v, want not found", err)
	}
}

func TestFakePodDeletedByHandIsNodeGone(t *testing.T) {
	e := newFakeEnv(t)
	e.create("n1", "ws/cpu")
	e.setStatus("n1", running("10.88.0.9"))
	e.event() // NodeReady
	if err := e.cs.CoreV1().Pods("ml").Delete(e.ctx, e.d.podName("n1"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := e.event(); ev.Kind != driver.NodeGone || ev.Reason != "the pod was deleted" {
		t.Fatalf("event %+v, want NodeGone: the pod was deleted", ev)
	}
	if _, err := e.d.Describe(e.ctx, "n1"); !driver.IsNotFound(err) {
		t.Fatalf("Describe of a deleted pod: %v, want not found", err)
	}
	// A node that ended by itself (OOMKilled) is gone with Kubernetes' reason.
	e.create("n2", "ws/cpu")
	e.setStatus("n2", func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}
	})
	if ev := e.event(); ev.Kind != driver.NodeGone || ev.NodeKey != "n2" || !strings.Contains(ev.Reason, "OOMKilled") {
		t.Fatalf("event %+v, want NodeGone of n2: OOMKilled", ev)
	}
}

func TestFakeTerminateAndAdoption(t *testing.T) {
	e := newFakeEnv(t)
	e.create("keep", "ws/cpu")
	e.create("drop", "ws/cpu")
	e.setStatus("keep", running("10.88.0.2"))
	// A restarted engine (a new driver, same engine id) finds both pods by label.
	_ = e.d.Close()
	e.d = e.start()
	nodes, err := e.d.List(e.ctx, "")
	if err != nil || len(nodes) != 2 {
		t.Fatalf("List after a restart: %+v, %v; want both pods", nodes, err)
	}
	info, err := e.d.Describe(e.ctx, "keep")
	if err != nil || !info.Ready || info.Address != "10.88.0.2" {
		t.Fatalf("Describe(keep) after a restart: %+v, %v", info, err)
	}
	if err := e.d.Terminate(e.ctx, "drop"); err != nil {
		t.Fatalf("Terminate: %v", err)
	}
	if err := e.d.Terminate(e.ctx, "drop"); err != nil {
		t.Fatalf("Terminate again: %v", err)
	}
	if pods := e.pods(); len(pods) != 1 || pods[0].Name != e.d.podName("keep") {
		t.Fatalf("pods after Terminate: %d, want only keep's", len(pods))
	}
	if _, err := e.d.Describe(e.ctx, "drop"); !driver.IsNotFound(err) {
		t.Fatalf("Describe of a terminated node: %v, want not found", err)
	}
	select {
	case ev := <-e.d.Events():
		t.Fatalf("Terminate emitted %+v; it emits nothing", ev)
	default:
	}
}
