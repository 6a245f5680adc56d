//go:build kubernetes

package kubernetes

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

const waitLimit = 2 * time.Minute

// waitEvent returns the first event of d that match accepts, failing after waitLimit.
func waitEvent(t *testing.T, d *Driver, what string, match func(driver.Event) bool) driver.Event {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		select {
		case ev := <-d.Events():
			if match(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %s within %s", what, waitLimit)
		}
	}
}

// waitingReason creates a node that cannot be placed and returns the scheduler's reason,
// as the engine learns it: from Create's answer when the scheduler had already refused
// the pod (common on a busy machine: no event follows, as the driver contract says), else
// from the NodeWaiting event.
func waitingReason(t *testing.T, d *Driver, spec driver.NodeSpec) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	info, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.Key, err)
	}
	if info.Ready {
		t.Fatalf("Create(%s) returned a ready node; want one the scheduler cannot place", spec.Key)
	}
	if unschedulable(info.Reason) {
		return info.Reason
	}
	ev := waitEvent(t, d, "NodeWaiting of "+spec.Key, func(ev driver.Event) bool { return ev.Kind == driver.NodeWaiting && ev.NodeKey == spec.Key })
	return ev.Reason
}

func readyNode(t *testing.T, d *Driver, spec driver.NodeSpec) driver.NodeInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	info, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.Key, err)
	}
	if !info.Ready {
		t.Cleanup(func() {
			if t.Failed() {
				pod, err := clientset(t).CoreV1().Pods(d.cfg.Namespace).Get(context.Background(), d.podName(spec.Key), metav1.GetOptions{})
				if err == nil {
					t.Logf("pod of %s: phase %s, conditions %+v, containers %+v", spec.Key, pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses)
				}
				info, err := d.Describe(context.Background(), spec.Key)
				t.Logf("Describe(%s): %+v, %v", spec.Key, info, err)
			}
		})
		waitEvent(t, d, "NodeReady of "+spec.Key, func(ev driver.Event) bool { return ev.Kind == driver.NodeReady && ev.NodeKey == spec.Key })
		if info, err = d.Describe(ctx, spec.Key); err != nil || !info.Ready {
			t.Fatalf("Describe(%s) after NodeReady: %+v, %v", spec.Key, info, err)
		}
	}
	return info
}

func enginePods(t *testing.T, d *Driver) []corev1.Pod {
	t.Helper()
	l, err := clientset(t).CoreV1().Pods(d.cfg.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: d.selector()})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// An engine that restarts (a new driver with the same engine id) adopts its pods and
// their tasks: the task's output and its end are not lost.
func TestClusterAdoptionAfterRestart(t *testing.T) {
	t.Parallel()
	cfg, d := newRestartableDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	spec := driver.NodeSpec{Key: "n1", Owner: "ws/cpu", VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}
	first := readyNode(t, d, spec)
	if err := d.StartTask(ctx, "n1", driver.TaskSpec{Key: "job-0", Command: []string{"sh", "-c", "echo started; exec sleep 1000000"}, Env: map[string]string{"RANK": "0"}}); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()

	d2 := newClusterDriver(t, cfg)
	nodes, err := d2.List(ctx, "")
	if err != nil || len(nodes) != 1 || nodes[0].Key != "n1" || nodes[0].Owner != "ws/cpu" {
		t.Fatalf("List after a restart: %+v, %v; want n1 of ws/cpu", nodes, err)
	}
	info, err := d2.Describe(ctx, "n1")
	if err != nil || !info.Ready || info.Address != first.Address {
		t.Fatalf("Describe after a restart: %+v, %v; want ready at %s", info, err, first.Address)
	}
	if st, err := d2.TaskStatus(ctx, "n1", "job-0"); err != nil || !st.Running {
		t.Fatalf("TaskStatus after a restart: %+v, %v; want running", st, err)
	}
	if err := d2.KillTask(ctx, "n1", "job-0"); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, d2, "TaskExited of job-0", func(ev driver.Event) bool { return ev.Kind == driver.TaskExited && ev.TaskKey == "job-0" })
	if ev.ExitCode <= 128 {
		t.Fatalf("killed task exited %d, want 128 + a signal", ev.ExitCode)
	}
	out, err := d2.TaskOutput(ctx, "n1", "job-0", 0)
	if err != nil || string(out) != "started\n" {
		t.Fatalf("output after a restart: %q, %v", out, err)
	}
	if err := d2.Terminate(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if pods := enginePods(t, d2); len(pods) != 0 {
		t.Fatalf("%d pods left after Terminate", len(pods))
	}
}

// A pod deleted by someone else is NodeGone with that reason.
func TestClusterPodDeletedByHand(t *testing.T) {
	t.Parallel()
	d := newClusterDriver(t, clusterConfig(t))
	readyNode(t, d, driver.NodeSpec{Key: "n1", Owner: "ws/cpu", VCPUs: 1, MemoryGB: 1})
	if err := clientset(t).CoreV1().Pods(d.cfg.Namespace).Delete(context.Background(), d.podName("n1"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, d, "NodeGone of n1", func(ev driver.Event) bool { return ev.Kind == driver.NodeGone && ev.NodeKey == "n1" })
	if !strings.HasPrefix(ev.Reason, "the pod was deleted") {
		t.Fatalf("NodeGone reason %q, want the pod was deleted", ev.Reason)
	}
	if err := d.Terminate(context.Background(), "n1"); err != nil {
		t.Fatalf("Terminate of a deleted node: %v", err)
	}
}

// A VM size bigger than the cluster's node is pending with the scheduler's reason.
func TestClusterUnschedulableReason(t *testing.T) {
	t.Parallel()
	cfg := clusterConfig(t)
	cfg.RequestScale = 1
	d := newClusterDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	info, err := d.Create(ctx, driver.NodeSpec{Key: "big", Owner: "ws/big", VMSize: "Standard_D64s_v3", VCPUs: 64, MemoryGB: 256})
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler's verdict is a change of the pod's status, which no event reports:
	// read it until it shows (bounded).
	for !strings.HasPrefix(info.Reason, "Unschedulable") {
		select {
		case <-ctx.Done():
			t.Fatalf("Describe(big) reason %q, want Unschedulable", info.Reason)
		case <-time.After(100 * time.Millisecond):
		}
		if info, err = d.Describe(ctx, "big"); err != nil {
			t.Fatal(err)
		}
	}
	if info.Ready || !strings.Contains(info.Reason, "Insufficient") {
		t.Fatalf("Describe(big) = %+v, want not ready with the scheduler's message", info)
	}
	if err := d.Terminate(ctx, "big"); err != nil {
		t.Fatal(err)
	}
}

// A pod not running within the start timeout (on the driver's clock) is deleted and
// NodeGone with a reason that says so.
func TestClusterStartTimeout(t *testing.T) {
	t.Parallel()
	cfg := clusterConfig(t)
	clock := clocktesting.NewFakeClock(time.Now())
	cfg.Clock, cfg.StartTimeout, cfg.schedulingGates = clock, 10*time.Minute, []string{testHold}
	d := newClusterDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := d.Create(ctx, driver.NodeSpec{Key: "held", Owner: "ws/cpu", VCPUs: 1, MemoryGB: 1}); err != nil {
		t.Fatal(err)
	}
	clock.Step(10 * time.Minute)
	ev := waitEvent(t, d, "NodeGone of held", func(ev driver.Event) bool { return ev.Kind == driver.NodeGone && ev.NodeKey == "held" })
	if !strings.Contains(ev.Reason, "not running within the start timeout (10m0s): SchedulingGated") {
		t.Fatalf("NodeGone reason %q", ev.Reason)
	}
	if err := d.Terminate(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if pods := enginePods(t, d); len(pods) != 0 {
		t.Fatalf("%d pods left after the start timeout", len(pods))
	}
}

// Create/release cycles leave no pod; it logs the node's create-to-ready time against a
// bare pod's create-to-Running on the same cluster. make test runs 20 cycles (about a
// minute); MLCOMPUTE_KUBE_CYCLES=100 runs the hundred.
func TestClusterCreateReleaseCycles(t *testing.T) {
	t.Parallel()
	d := newClusterDriver(t, clusterConfig(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cycles := 20
	if v := os.Getenv("MLCOMPUTE_KUBE_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MLCOMPUTE_KUBE_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	var ready, release time.Duration
	for i := range cycles {
		key := fmt.Sprintf("c%d", i)
		start := time.Now()
		readyNode(t, d, driver.NodeSpec{Key: key, Owner: "ws/cycles", VCPUs: 1, MemoryGB: 1})
		ready += time.Since(start)
		start = time.Now()
		if err := d.Terminate(ctx, key); err != nil {
			t.Fatalf("cycle %d: Terminate: %v", i, err)
		}
		release += time.Since(start)
	}
	if pods := enginePods(t, d); len(pods) != 0 {
		t.Fatalf("%d pods left after %d cycles", len(pods), cycles)
	}
	t.Logf("%d cycles: node create to ready %s on average, release %s on average", cycles, ready/time.Duration(cycles), release/time.Duration(cycles))
	t.Logf("bare pod create to Running: %s", barePod(t, d))
}

// barePod creates a pod of the same image with client-go alone, times it to Running
// through a watch, and deletes it.
func barePod(t *testing.T, d *Driver) time.Duration {
	t.Helper()
	cs := clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	pod, err := buildPod(d.ps, driver.NodeSpec{Key: "bare", Owner: "bare", VCPUs: 1, MemoryGB: 1})
	if err != nil {
		t.Fatal(err)
	}
	pod.Name, pod.Labels = "bare-"+d.cfg.EngineID, map[string]string{"mlcompute.dev/bare": d.cfg.EngineID}
	w, err := cs.CoreV1().Pods(d.cfg.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: "mlcompute.dev/bare=" + d.cfg.EngineID})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if _, err := cs.CoreV1().Pods(d.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cs.CoreV1().Pods(d.cfg.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	}()
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning {
			return time.Since(start)
		}
	}
	t.Fatal("the bare pod did not run")
	return 0
}
