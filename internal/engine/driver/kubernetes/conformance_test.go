//go:build kubernetes

package kubernetes

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/drivertest"
)

// TestConformance runs the driver suite against a real cluster. Pods are created with a
// scheduling gate, so a node stays pending until the suite makes it ready from outside by
// removing the gate; a node dies from outside when someone deletes its pod.
func TestConformance(t *testing.T) {
	t.Parallel()
	cs := clientset(t)
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			cfg := clusterConfig(t)
			cfg.schedulingGates = []string{testHold}
			return newClusterDriver(t, cfg)
		},
		CreatePending: true,
		MakeReady: func(t *testing.T, d driver.Driver, key string) {
			release(t, cs, d.(*Driver), key)
		},
		KillNode: func(t *testing.T, d driver.Driver, key string) {
			kd := d.(*Driver)
			if err := cs.CoreV1().Pods(kd.cfg.Namespace).Delete(context.Background(), kd.podName(key), metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting the pod of %s: %v", key, err)
			}
		},
		FixedTaskPort: true, // a pod's network namespace is its own: TaskPort is the fixed one
		WaitLimit:     time.Minute,
	})
}
