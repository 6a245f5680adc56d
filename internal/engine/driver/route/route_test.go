package route_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/kubernetes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/route"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// lookups is the store as the routes see it: which cluster each recorded job pod is on.
type lookups struct{ pods map[string]model.KubeCluster }

func (lookups) AttachedMachine(context.Context, string) (model.Attached, error) {
	return model.Attached{}, driver.ErrNotFound
}
func (lookups) AttachedTasks(context.Context, string) ([]string, error) { return nil, nil }
func (l lookups) KubeNode(key string) (model.KubeCluster, bool, error) {
	k, ok := l.pods[key]
	return k, ok, nil
}
func (l lookups) KubeClusters() ([]model.KubeCluster, error) {
	var out []model.KubeCluster
	for _, k := range l.pods {
		out = append(out, k)
	}
	return out, nil
}

// Job pods go to their cluster's driver, built once per cluster; other nodes to the
// operator's driver; a pod the store does not record is not found, and releasing it is no
// error.
func TestNodesGoToTheirDriver(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	base := fake.New(clk)
	teamA := model.KubeCluster{Namespace: "team-a", Image: "img"}
	teamB := model.KubeCluster{Namespace: "team-b"} // the engine's default image
	podA1, podA2, podB := model.KubeNodePrefix+"a1", model.KubeNodePrefix+"a2", model.KubeNodePrefix+"b1"
	clusters := map[string]*fake.Driver{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := route.New(ctx, base, route.Config{
		Lookups:          lookups{pods: map[string]model.KubeCluster{podA1: teamA, podA2: teamA, podB: teamB}},
		DefaultKubeImage: "default-img",
		NewKubeDriver: func(_ context.Context, cfg kubernetes.Config) (driver.Driver, error) {
			if want := map[string]string{"team-a": "img", "team-b": "default-img"}[cfg.Namespace]; cfg.Image != want {
				t.Errorf("cluster %s's driver has image %q; want %q", cfg.Namespace, cfg.Image, want)
			}
			if clusters[cfg.Namespace] != nil {
				t.Fatalf("a second driver built for cluster %s", cfg.Namespace)
			}
			clusters[cfg.Namespace] = fake.New(clk)
			return clusters[cfg.Namespace], nil
		},
	})
	for _, key := range []string{"n1", podA1, podA2, podB} {
		if _, err := d.Create(ctx, driver.NodeSpec{Key: key, Owner: "ws/c"}); err != nil {
			t.Fatalf("Create(%s): %v", key, err)
		}
	}
	for driverName, want := range map[string][]string{"base": {"n1"}, "team-a": {podA1, podA2}, "team-b": {podB}} {
		got := base
		if driverName != "base" {
			got = clusters[driverName]
		}
		nodes, err := got.List(ctx, "")
		if err != nil || len(nodes) != len(want) {
			t.Fatalf("%s holds %v, %v; want %v", driverName, nodes, err, want)
		}
	}
	unknown := model.KubeNodePrefix + "gone"
	if _, err := d.Describe(ctx, unknown); !driver.IsNotFound(err) {
		t.Fatalf("Describe of a pod the store does not record: %v; want not found", err)
	}
	if err := d.Terminate(ctx, unknown); err != nil {
		t.Fatalf("Terminate of a pod the store does not record: %v", err)
	}
}

// Without a Kubernetes node driver, a job pod is refused for good.
func TestNoKubeDriverRefusesPods(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	pod := model.KubeNodePrefix + "a1"
	d := route.New(context.Background(), fake.New(clk), route.Config{Lookups: lookups{pods: map[string]model.KubeCluster{pod: {Namespace: "a"}}}})
	_, err := d.Create(context.Background(), driver.NodeSpec{Key: pod, Owner: "ws/c"})
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "no Kubernetes node driver") {
		t.Fatalf("Create of a job pod without a Kubernetes driver: %v; want a permanent error", err)
	}
}
