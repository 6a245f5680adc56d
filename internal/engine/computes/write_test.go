package computes

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// A group of writes commits in one transaction when every write succeeds; when one fails,
// nothing of the group's transaction stays (records, quota index, commit hooks) and each
// write runs again alone, so the others commit and the failed one gets its own error.
func TestWriteGroupCommitsTogetherOrEachAlone(t *testing.T) {
	st := storetest.Open(t, t.TempDir())
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	c, err := New(Config{Store: st, Clock: clk, Logger: hclog.NewNullLogger(), Loop: runtime.New(runtime.Config{Clock: clk, Manual: true})})
	if err != nil {
		t.Fatal(err)
	}
	runs, hooks := map[string]int{}, map[string]int{}
	put := func(name string, fail error) *groupedWrite {
		return &groupedWrite{f: func(tx *store.Tx) error {
			runs[name]++
			rec := model.Compute{Workspace: "lab", Name: name, Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
				ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}
			if err := c.putCompute(tx, rec); err != nil {
				return err
			}
			c.onCommit(func() { hooks[name]++ })
			return fail
		}}
	}
	stored := func(name string) bool {
		var ok bool
		if err := st.View(func(tx *store.Tx) (err error) {
			ok, err = tx.Get(store.Computes, "lab/"+name, &model.Compute{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_, indexed := c.quota.Get("lab/" + name)
		if ok != indexed {
			t.Errorf("%s: stored %v but in the quota index %v", name, ok, indexed)
		}
		return ok
	}

	group := []*groupedWrite{put("a", nil), put("b", nil)}
	c.mu.Lock()
	c.writeGroup(group)
	c.mu.Unlock()
	for _, name := range []string{"a", "b"} {
		if runs[name] != 1 || hooks[name] != 1 || !stored(name) {
			t.Errorf("%s: ran %d times, its commit hook %d, stored %v; want once, once, stored", name, runs[name], hooks[name], stored(name))
		}
	}
	if !group[0].done || !group[1].done || group[0].err != nil || group[1].err != nil {
		t.Fatalf("outcomes = %+v, %+v; want both done without error", *group[0], *group[1])
	}

	refused := errors.New("refused")
	group = []*groupedWrite{put("c", nil), put("d", refused), put("e", nil)}
	c.mu.Lock()
	c.writeGroup(group)
	c.mu.Unlock()
	if !errors.Is(group[1].err, refused) || group[0].err != nil || group[2].err != nil {
		t.Fatalf("errors = %v, %v, %v; want only d's", group[0].err, group[1].err, group[2].err)
	}
	for _, name := range []string{"c", "e"} {
		if hooks[name] != 1 || !stored(name) {
			t.Errorf("%s: commit hook ran %d times, stored %v; want once, stored", name, hooks[name], stored(name))
		}
	}
	if hooks["d"] != 0 || stored("d") {
		t.Errorf("d failed, but its commit hook ran %d times and it is stored: %v", hooks["d"], stored("d"))
	}
}
