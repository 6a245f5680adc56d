package provider

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// The quota check's list of a workspace's computes is fetched once per provider instance
// (its quotaCache) and follows what that provider creates, updates and deletes.
func TestQuotaComputesFollowThisClientsChanges(t *testing.T) {
	ctx := context.Background()
	e := enginetest.Start(t, enginetest.Options{})
	c := e.Client(t, "")
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	cluster := func(name string, maxNodes int64) api.ComputeSpec {
		return api.ComputeSpec{Name: name, Type: api.TypeComputeCluster, VMSize: "Standard_DS1_v2", VMPriority: api.PriorityDedicated,
			ScaleSettings: &api.ScaleSettings{MaxNodeCount: maxNodes}}
	}
	caches := map[*client.Client]*quotaCache{}
	listed := func(c *client.Client) map[string]int64 {
		t.Helper()
		if caches[c] == nil {
			caches[c] = &quotaCache{}
		}
		computes, err := caches[c].workspaceComputes(ctx, c, "lab")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, comp := range computes {
			out[comp.Name] = comp.ScaleSettings.MaxNodeCount
		}
		return out
	}
	want := func(got map[string]int64, names ...string) {
		t.Helper()
		var have []string
		for n := range got {
			have = append(have, n)
		}
		slices.Sort(have)
		if !slices.Equal(have, names) {
			t.Fatalf("listed %v, want %v", have, names)
		}
	}

	q := &quotaCache{}
	caches[c] = q
	if _, err := createCompute(ctx, c, q, "lab", cluster("first", 1)); err != nil {
		t.Fatal(err)
	}
	want(listed(c), "first") // fetched now
	other := e.Client(t, "")
	if _, err := other.CreateCompute(ctx, "lab", cluster("outside", 1)); err != nil {
		t.Fatal(err)
	}
	want(listed(c), "first") // another client's compute waits for the next command
	want(listed(other), "first", "outside")

	if _, err := createCompute(ctx, c, q, "lab", cluster("second", 1)); err != nil {
		t.Fatal(err)
	}
	want(listed(c), "first", "second")
	var diags diag.Diagnostics
	updated := updateCompute(ctx, c, q, &diags, nil, clusterKind, api.ID{Workspace: "lab", Name: "second"},
		api.ComputeUpdate{ScaleSettings: &api.ScaleSettings{MaxNodeCount: 3, ScaleDownNodesAfterIdleDuration: "PT120S"}}, time.Minute)
	if updated == nil || diags.HasError() {
		t.Fatalf("update: %v", diags)
	}
	if got := listed(c)["second"]; got != 3 {
		t.Errorf("max_node_count after the update %d, want 3", got)
	}
	deleteCompute(ctx, c, q, &diags, nil, clusterKind, api.ID{Workspace: "lab", Name: "first"}, time.Minute)
	if diags.HasError() {
		t.Fatalf("delete: %v", diags)
	}
	want(listed(c), "second")

	// A change whose outcome is not known drops the list: the next check fetches it again.
	if _, err := createCompute(ctx, c, q, "lab", cluster("second", 1)); err == nil {
		t.Fatal("creating a compute whose name is taken succeeded")
	}
	want(listed(c), "outside", "second")
}
