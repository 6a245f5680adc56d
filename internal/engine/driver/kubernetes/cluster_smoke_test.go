//go:build kubernetes

// Tests with the kubernetes build tag run against a real cluster: `make test-kube` starts one
// (scripts/kube.sh) and sets KUBECONFIG and MLCOMPUTE_KUBE_IMAGE; without them they fail.

package kubernetes

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// smokeConfig is the cluster of `make kube-up`, from the environment it prints.
func smokeConfig(t *testing.T) Config {
	t.Helper()
	for _, name := range []string{"KUBECONFIG", ImageEnv} {
		if os.Getenv(name) == "" {
			t.Fatalf("%s is not set: run the Kubernetes tests with `make test-kube`, or in a shell set up by `eval \"$(make -s kube-up)\"`", name)
		}
	}
	return Config{Namespace: "default", Image: os.Getenv(ImageEnv)}
}

// TestKubeClusterSmoke checks that the cluster runs a pod of the node image: it gets to
// Running (seen by a watch), python3 runs in it through pods/exec, and it is deleted.
func TestKubeClusterSmoke(t *testing.T) {
	t.Parallel()
	cfg := smokeConfig(t)
	cs, rc, err := cfg.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	// A bound for a broken cluster, not a measurement: a healthy one takes about two seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := cs.CoreV1().Pods(cfg.Namespace)

	noToken := false
	grace := int64(5)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "smoke-", Labels: map[string]string{"mlcompute.test": "smoke"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &noToken,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            "node",
				Image:           cfg.Image,
				ImagePullPolicy: corev1.PullNever,
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the pod: %v", err)
	}
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})
	byName := fields.OneTermEqualSelector("metadata.name", pod.Name).String()

	// Running, from the watch (from the version Create returned, so no event is missed).
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatalf("watching the pod: %v", err)
	}
	for running := false; !running; {
		select {
		case <-ctx.Done():
			w.Stop()
			t.Fatalf("the pod %s did not run: %v (last status: %+v)", pod.Name, ctx.Err(), pod.Status)
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of %s ended before the pod ran", pod.Name)
			}
			if ev.Type == watch.Error {
				t.Fatalf("the watch of %s failed: %v", pod.Name, apierrors.FromObject(ev.Object))
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod {
				pod = p
			}
			switch pod.Status.Phase {
			case corev1.PodRunning:
				running = true
			case corev1.PodFailed, corev1.PodSucceeded:
				t.Fatalf("the pod %s ended (%s) instead of running: %+v", pod.Name, pod.Status.Phase, pod.Status)
			}
		}
	}
	w.Stop()
	if pod.Status.PodIP == "" {
		t.Errorf("the running pod %s has no IP", pod.Name)
	}

	// python3 inside the pod, through the pods/exec API.
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(cfg.Namespace).Name(pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: "node",
		Command:   []string{"python3", "-c", "print(1+1)"},
		Stdout:    true,
		Stderr:    true,
	}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		t.Fatalf("preparing the exec: %v", err)
	}
	var stdout, stderr bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("exec python3 in %s: %v (stderr: %q)", pod.Name, err, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "2" {
		t.Fatalf("python3 -c 'print(1+1)' printed %q (stderr: %q), want 2", got, stderr.String())
	}

	// Deleted: the watch sees it go.
	w, err = pods.Watch(ctx, metav1.ListOptions{FieldSelector: byName})
	if err != nil {
		t.Fatalf("watching the pod: %v", err)
	}
	defer w.Stop()
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the pod: %v", err)
	}
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("the pod %s was not gone after its deletion: %v", pod.Name, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of %s ended before the pod was gone", pod.Name)
			}
			if ev.Type == watch.Error {
				t.Fatalf("the watch of %s failed: %v", pod.Name, apierrors.FromObject(ev.Object))
			}
			if ev.Type == watch.Deleted {
				return
			}
		}
	}
}
