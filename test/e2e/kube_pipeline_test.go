//go:build kubernetes

package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
)

// TestE2E_KubePipeline: a pipeline whose steps run in the engine's pods; deleting the pod
// under the running train step fails its job within 30 s, and the pipeline runs train
// again in a new pod and completes (requeued when the engine saw the pod gone first, as it
// does when the watch reports the deletion before the step's process ends).
func TestE2E_KubePipeline(t *testing.T) {
	t.Parallel()
	cs := requireKube(t)
	u := kubeUser(t)
	u.startServe("--nodes", "kubernetes")
	u.writeConfig(kubeClusterConfig)
	u.mustTerraform("apply", "-auto-approve")
	engineID := u.engineID()
	t.Cleanup(func() {
		// The cluster is shared: should the test stop before destroy, no pod of its
		// engine stays behind.
		_ = cs.CoreV1().Pods("default").DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: kubernetes.LabelEngine + "=" + engineID})
	})
	// A pod's hostname is its name, kubernetes.PodName(<engine id>, <node>):
	// <engine id>-node-<id>.
	onPod := regexp.MustCompile(`on pod ` + regexp.QuoteMeta(engineID) + `-node-\S+`)
	lost := u.pipelineLosingANode("pod $(hostname)", onPod, func(node string) {
		if err := cs.CoreV1().Pods("default").Delete(context.Background(), kubernetes.PodName(engineID, node), metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s's pod: %v", node, err)
		}
	})
	t.Logf("the engine saw train's node lost before its process ended: %v", lost)
	u.mustTerraform("destroy", "-auto-approve")
	u.waitFor("no pod left", 60*time.Second, func() bool { return len(u.enginePods(cs)) == 0 })
}
