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
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// lookups is the store as the routes see it: which cluster each recorded job pod is on.
type lookups struct{ pods map[string]kubernetes.Config }

func (lookups) AttachedTarget(context.Context, string) (ssh.Target, error) {
	return ssh.Target{}, driver.ErrNotFound
}
func (lookups) AttachedTasks(context.Context, string) ([]string, error) { return nil, nil }
func (l lookups) KubeNode(key string) (kubernetes.Config, bool, error) {
	cfg, ok := l.pods[key]
	return cfg, ok, nil
}
func (l lookups) KubeClusters() ([]kubernetes.Config, error) {
	var out []kubernetes.Config
	for _, cfg := range l.pods {
		out = append(out, cfg)
	}
	return out, nil
}

// Job pods go to their cluster's driver, built once per cluster; other nodes to the
// operator's driver; a pod the store does not record is not found, and releasing it is no
// error.
func TestNodesGoToTheirDriver(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	base := fake.New(clk)
	teamA := kubernetes.Config{Namespace: "team-a", Image: "img"}
	teamB := kubernetes.Config{Namespace: "team-b", Image: "img"}
	podA1, podA2, podB := model.KubeNodePrefix+"a1", model.KubeNodePrefix+"a2", model.KubeNodePrefix+"b1"
	clusters := map[string]*fake.Driver{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := route.New(ctx, base, route.Config{
		Lookups: lookups{pods: map[string]kubernetes.Config{podA1: teamA, podA2: teamA, podB: teamB}},
		NewKubeDriver: func(_ context.Context, cfg kubernetes.Config) (driver.Driver, error) {
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
	d := route.New(context.Background(), fake.New(clk), route.Config{Lookups: lookups{pods: map[string]kubernetes.Config{pod: {Namespace: "a"}}}})
	_, err := d.Create(context.Background(), driver.NodeSpec{Key: pod, Owner: "ws/c"})
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "no Kubernetes node driver") {
		t.Fatalf("Create of a job pod without a Kubernetes driver: %v; want a permanent error", err)
	}
}
