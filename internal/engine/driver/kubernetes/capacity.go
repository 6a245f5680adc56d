package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// Capacity is what the nodes an attached cluster's instance types can use offer.
type Capacity struct {
	// Listed is false when the credentials may not list nodes: the capacity is unknown
	// (and reported as zero).
	Listed bool
	// Nodes counts the nodes at least one instance type's node selector matches.
	Nodes    int
	VCPUs    int64
	MemoryGB float64
}

// ReadCapacity lists the cluster's nodes and sums the allocatable CPU and memory of those
// that at least one of the instance types can land on (its node selector matches and the
// node is not cordoned), each node once.
func ReadCapacity(ctx context.Context, cfg Config, types []driver.PodShape) (Capacity, error) {
	nodes, listed, err := listNodes(ctx, cfg)
	if err != nil || !listed {
		return Capacity{}, err
	}
	return SumCapacity(nodes, types), nil
}

// CheckInstanceType fails, naming the instance type, when no node of the cluster can run
// one of its pods: none matches its node selector, or every one that does has less
// allocatable than it requests. Credentials that may not list nodes cannot tell: nil.
func CheckInstanceType(ctx context.Context, cfg Config, shape driver.PodShape) error {
	nodes, listed, err := listNodes(ctx, cfg)
	if err != nil || !listed {
		return err
	}
	return Satisfiable(nodes, shape)
}

func listNodes(ctx context.Context, cfg Config) ([]corev1.Node, bool, error) {
	cs, _, err := checkClient(cfg)
	if err != nil {
		return nil, false, err
	}
	return listNodesWith(ctx, cs)
}

func listNodesWith(ctx context.Context, cs kubernetes.Interface) ([]corev1.Node, bool, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("listing the cluster's nodes: %w", err)
	}
	return list.Items, true, nil
}

// usable reports whether pods of shape may be placed on node by its labels.
func usable(node corev1.Node, shape driver.PodShape) bool {
	return !node.Spec.Unschedulable && labels.SelectorFromSet(shape.NodeSelector).Matches(labels.Set(node.Labels))
}

// SumCapacity sums the allocatable CPU (whole vCPUs, rounded down) and memory (GiB, to
// 0.01) of the nodes at least one of types can use.
func SumCapacity(nodes []corev1.Node, types []driver.PodShape) Capacity {
	out := Capacity{Listed: true}
	var milli, bytes int64
	for _, n := range nodes {
		if !slices.ContainsFunc(types, func(s driver.PodShape) bool { return usable(n, s) }) {
			continue
		}
		out.Nodes++
		milli = addCapped(milli, n.Status.Allocatable.Cpu().MilliValue())
		bytes = addCapped(bytes, n.Status.Allocatable.Memory().Value())
	}
	out.VCPUs = milli / 1000
	out.MemoryGB = math.Round(float64(bytes)/(1<<30)*100) / 100
	return out
}

func addCapped(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// podRequests is what the scheduler counts for a pod of shape: its requests, and a limit's
// value for a resource that has a limit but no request (Kubernetes' defaulting).
func podRequests(shape driver.PodShape) (map[string]resource.Quantity, error) {
	out := map[string]resource.Quantity{}
	for _, m := range []map[string]string{shape.Limits, shape.Requests} {
		for name, v := range m {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("instance type %q: %s = %q is not a quantity: %w", shape.InstanceType, name, v, err)
			}
			out[name] = q
		}
	}
	return out, nil
}

// Satisfiable fails, naming the instance type, when no node can run one of its pods.
func Satisfiable(nodes []corev1.Node, shape driver.PodShape) error {
	want, err := podRequests(shape)
	if err != nil {
		return err
	}
	matching := 0
	var short []string
	for _, n := range nodes {
		if !usable(n, shape) {
			continue
		}
		matching++
		var lacks []string
		for _, name := range slices.Sorted(maps.Keys(want)) {
			have, ok := n.Status.Allocatable[corev1.ResourceName(name)]
			if w := want[name]; w.Sign() > 0 && (!ok || have.Cmp(w) < 0) {
				lacks = append(lacks, fmt.Sprintf("%s %s allocatable < %s requested", name, have.String(), w.String()))
			}
		}
		if len(lacks) == 0 {
			return nil
		}
		short = append(short, fmt.Sprintf("%s: %s", n.Name, strings.Join(lacks, ", ")))
	}
	if matching == 0 {
		return fmt.Errorf("instance type %q cannot run anywhere: no schedulable node of the cluster has the labels of its node_selector %s", shape.InstanceType, labels.Set(shape.NodeSelector))
	}
	slices.Sort(short)
	if len(short) > 5 {
		short = append(short[:5], fmt.Sprintf("and %d more", len(short)-5))
	}
	return fmt.Errorf("instance type %q requests more than any of its %d node(s) can give (%s): lower its resources.requests or add a larger node", shape.InstanceType, matching, strings.Join(short, "; "))
}
