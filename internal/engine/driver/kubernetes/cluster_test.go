//go:build kubernetes

package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The tests tagged kubernetes run against a real cluster: KUBECONFIG names it and
// MLCOMPUTE_KUBE_IMAGE is an image its node has (eval "$(make -s kube-up)" sets both).
// They fail without them: a run that asked for them must not pass by testing nothing.

// testHold is the scheduling gate that keeps the conformance suite's pods pending until
// it makes them ready.
const testHold = "mlcompute.dev/test-hold"

// clusterConfig is the test cluster's configuration. The requests of a VM size are
// scaled down so that the suite's sizes (4 vCPUs) fit a small test machine.
func clusterConfig(t *testing.T) Config {
	t.Helper()
	kc, img := os.Getenv("KUBECONFIG"), os.Getenv(ImageEnv)
	if kc == "" || img == "" {
		t.Fatalf("the kubernetes tests need a cluster: set KUBECONFIG and %s (eval \"$(make -s kube-up)\")", ImageEnv)
	}
	return Config{KubeconfigPath: kc, Namespace: "default", Image: img, RequestScale: 0.05, StartTimeout: 5 * time.Minute}
}

// clientset is a client of the test cluster, for what the tests do from outside the driver.
func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, _, err := clusterConfig(t).Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func newEngineID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "dt-" + hex.EncodeToString(b)
}

// newClusterDriver starts a driver on the test cluster. With an empty EngineID it gets a
// fresh one, whose pods are all deleted when the test ends.
func newClusterDriver(t *testing.T, cfg Config) *Driver {
	t.Helper()
	if cfg.EngineID == "" {
		cfg.EngineID = newEngineID()
		t.Cleanup(func() { deleteEnginePods(t, cfg) })
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Info, Output: os.Stderr})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// newRestartableDriver starts a driver with a fresh engine id and returns its config too,
// so that the test can start the engine again (a second driver of the same config adopts
// the first's pods). The engine's pods are deleted when the test ends.
func newRestartableDriver(t *testing.T) (Config, *Driver) {
	t.Helper()
	cfg := clusterConfig(t)
	cfg.EngineID = newEngineID()
	t.Cleanup(func() { deleteEnginePods(t, cfg) })
	return cfg, newClusterDriver(t, cfg)
}

// deleteEnginePods deletes what is left of an engine's pods and fails the test if any
// stays.
func deleteEnginePods(t *testing.T, cfg Config) {
	cs := clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: LabelEngine + "=" + labelValue(cfg.EngineID)}
	zero := int64(0)
	l, err := cs.CoreV1().Pods(cfg.Namespace).List(ctx, sel)
	if err != nil {
		t.Errorf("cleanup: listing pods: %v", err)
		return
	}
	if len(l.Items) == 0 {
		return
	}
	if err := cs.CoreV1().Pods(cfg.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil {
		t.Errorf("cleanup: deleting pods: %v", err)
	}
	w, err := cs.CoreV1().Pods(cfg.Namespace).Watch(ctx, sel)
	if err != nil {
		t.Errorf("cleanup: watching pods: %v", err)
		return
	}
	defer w.Stop()
	for {
		l, err := cs.CoreV1().Pods(cfg.Namespace).List(ctx, sel)
		if err == nil && len(l.Items) == 0 {
			return
		}
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
			t.Errorf("cleanup: pods of engine %s still there", cfg.EngineID)
			return
		}
	}
}

// release removes the test hold of a node's pod, which the scheduler then places.
func release(t *testing.T, cs kubernetes.Interface, d *Driver, key string) {
	t.Helper()
	patch := []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`)
	if _, err := cs.CoreV1().Pods(d.cfg.Namespace).Patch(context.Background(), d.podName(key), types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("releasing the pod of %s: %v", key, err)
	}
}
