package remotetask

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// testNode is a driver's node type: Node and what only the driver knows.
type testNode struct {
	Node
	job string
}

func newTable(t *testing.T) (*Table[*testNode], *sync.Mutex) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var mu sync.Mutex
	return NewTable[*testNode](&mu, ctx, clk, &wg, hclog.NewNullLogger()), &mu
}

// put watches a new node as a driver does: NewNode, then Put with the lock held.
func put(tb *Table[*testNode], key, job string) *testNode {
	n := &testNode{Node: tb.NewNode(key, driver.NodeInfo{Key: key}), job: job}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.Put(n)
	return n
}

func stopped(n *testNode) bool { return n.Context().Err() != nil }

// A node put under a key that holds another replaces it and ends the other's context (its
// tasks' watches); a watch holding the old one finds it no longer current, and dropping
// it leaves the new one watched.
func TestTablePutReplacesAndDropsOnlyTheCurrentNode(t *testing.T) {
	tb, mu := newTable(t)
	first := put(tb, "n1", "job-1")
	if got := first.Seen; !got.Equal(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("Seen %s; want the clock's now", got)
	}
	second := put(tb, "n1", "job-2")
	mu.Lock()
	defer mu.Unlock()
	if !stopped(first) || stopped(second) {
		t.Fatalf("after the replacement: first stopped %v, second stopped %v; want true, false", stopped(first), stopped(second))
	}
	if tb.Current(first) || !tb.Current(second) {
		t.Fatalf("Current(first) %v, Current(second) %v; want false, true", tb.Current(first), tb.Current(second))
	}
	tb.Drop(first)
	if n, ok := tb.Get("n1"); !ok || n != second {
		t.Fatalf("dropping the replaced node removed the current one: Get = %v, %v", n, ok)
	}
	tb.Drop(second)
	if _, ok := tb.Get("n1"); ok || !stopped(second) || tb.Len() != 0 {
		t.Fatalf("after Drop: watched %v, stopped %v, len %d; want gone and stopped", ok, stopped(second), tb.Len())
	}
}

// A node being terminated is no longer current (its end is no NodeGone), and its tasks'
// watches end only when asked; Forget drops it.
func TestTableMarkTerminatingAndForget(t *testing.T) {
	tb, mu := newTable(t)
	a, b := put(tb, "a", "job-a"), put(tb, "b", "job-b")
	tb.MarkTerminating("a", false)
	tb.MarkTerminating("b", true)
	tb.MarkTerminating("unknown", true) // no node: nothing to mark
	mu.Lock()
	if !a.Terminating || !b.Terminating || tb.Current(a) || tb.Current(b) {
		mu.Unlock()
		t.Fatalf("terminating %v %v, current %v %v; want both terminating and neither current", a.Terminating, b.Terminating, tb.Current(a), tb.Current(b))
	}
	mu.Unlock()
	if stopped(a) || !stopped(b) {
		t.Fatalf("stopped a %v, b %v; want only b's tasks stopped", stopped(a), stopped(b))
	}
	tb.Forget("a")
	tb.Forget("unknown")
	mu.Lock()
	defer mu.Unlock()
	if _, ok := tb.Get("a"); ok || !stopped(a) || tb.Len() != 1 {
		t.Fatalf("after Forget(a): watched %v, stopped %v, len %d; want a gone and stopped, b left", ok, stopped(a), tb.Len())
	}
	keys := map[string]string{}
	for k, n := range tb.All() {
		keys[k] = n.job
	}
	if len(keys) != 1 || keys["b"] != "job-b" {
		t.Fatalf("All yields %v; want b's node only", keys)
	}
}

// Live answers a watched node without asking the machines; a node not watched, or being
// terminated, is asked for with describe, and what describe watched is returned;
// describe's error (ErrNotFound) is returned as it is.
func TestTableLive(t *testing.T) {
	tb, _ := newTable(t)
	ctx := context.Background()
	watched := put(tb, "w", "job-w")
	asked := []string{}
	describe := func(_ context.Context, key string) (driver.NodeInfo, error) {
		asked = append(asked, key)
		switch key {
		case "adoptable", "ending":
			put(tb, key, "job-"+key)
			return driver.NodeInfo{Key: key}, nil
		case "describe-forgets":
			return driver.NodeInfo{Key: key}, nil
		}
		return driver.NodeInfo{}, driver.ErrNotFound
	}
	if n, err := tb.Live(ctx, "w", describe); err != nil || n != watched || len(asked) != 0 {
		t.Fatalf("Live(w) = %v, %v after asking %v; want the watched node, not asked", n, err, asked)
	}
	if n, err := tb.Live(ctx, "adoptable", describe); err != nil || n.job != "job-adoptable" {
		t.Fatalf("Live(adoptable) = %v, %v; want the node describe watched", n, err)
	}
	put(tb, "ending", "job-old")
	tb.MarkTerminating("ending", true)
	if n, err := tb.Live(ctx, "ending", describe); err != nil || n.job != "job-ending" {
		t.Fatalf("Live(ending) = %v, %v; want the node found again, not the terminating one", n, err)
	}
	if _, err := tb.Live(ctx, "gone", describe); !driver.IsNotFound(err) {
		t.Fatalf("Live(gone) err %v; want ErrNotFound", err)
	}
	if _, err := tb.Live(ctx, "describe-forgets", describe); !driver.IsNotFound(err) {
		t.Fatalf("Live of a node describe found but did not watch: err %v; want ErrNotFound", err)
	}
	if want := []string{"adoptable", "ending", "gone", "describe-forgets"}; len(asked) != len(want) {
		t.Fatalf("describe asked for %v; want %v", asked, want)
	}
}
