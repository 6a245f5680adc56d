package computes_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// owner records the task ends the core hands it; claim says which tasks it owns.
type owner struct {
	claim func(n model.Node, task string) bool
	mu    sync.Mutex
	got   []string
}

func (o *owner) OwnsTask(n model.Node, task string) bool { return o.claim(n, task) }

func (o *owner) TaskExited(_ context.Context, node, task string, code int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, fmt.Sprintf("%s %s %d", node, task, code))
}

func (o *owner) ends() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// A task's end reaches the owner that claims it from its node's record, asked in the order
// the owners were registered, whatever the task's key says; an end on a node whose record
// is gone reaches no one.
func TestTaskEndsReachTheOwnerTheNodesRecordNames(t *testing.T) {
	env := setup(t, computestest.Options{})
	// current claims the task a node's record names; rest claims every task (as the jobs
	// controller does), so it is registered last.
	current := &owner{claim: func(n model.Node, task string) bool { return n.Task == task }}
	rest := &owner{claim: func(model.Node, string) bool { return true }}
	env.Core.RegisterTaskOwner(current)
	env.Core.RegisterTaskOwner(rest)
	insert(t, env, cluster("a", 0, 1, api.PriorityDedicated))
	j := env.PutJob("lab/a", "job-00000001", 1)
	env.Core.Kick("lab/a")
	env.Settle()
	node := env.Job("lab", j.ID).Nodes[0]

	// A task the node's record does not name, with a key shaped like a job's rank.
	other := driver.TaskSpec{Key: "job-00000009.0-0", Command: []string{"true"}}
	if err := env.Driver.StartTask(context.Background(), node, other); err != nil {
		t.Fatal(err)
	}
	env.Driver.FinishTask(node, other.Key, 3)
	env.Settle()
	env.Driver.FinishTask(node, j.TaskKey(0), 0)
	env.Settle()
	if got, want := current.ends(), []string{node + " " + j.TaskKey(0) + " 0"}; !slices.Equal(got, want) {
		t.Fatalf("the owner of the node's recorded task got %v; want %v", got, want)
	}
	if got, want := rest.ends(), []string{node + " " + other.Key + " 3"}; !slices.Equal(got, want) {
		t.Fatalf("the owner of the other tasks got %v; want %v", got, want)
	}

	// The node's record goes (as a released node's does); a task still running on the
	// driver's node then ends for no owner.
	late := driver.TaskSpec{Key: "late", Command: []string{"true"}}
	if err := env.Driver.StartTask(context.Background(), node, late); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Update(func(tx *store.Tx) error { return tx.Delete(store.Nodes, "lab/a/"+node) }); err != nil {
		t.Fatal(err)
	}
	env.Driver.FinishTask(node, late.Key, 0)
	env.Settle()
	if n := len(current.ends()) + len(rest.ends()); n != 2 {
		t.Fatalf("the owners got %v and %v; want no end for a node whose record is gone", current.ends(), rest.ends())
	}
}
