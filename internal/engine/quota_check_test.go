package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointstest"
)

// The quota check (POST .../quota:check) answers a planned compute cluster or endpoint as
// its create or update would, from the same quota index, and changes nothing: the field
// is vm_size when not one node of the size fits, planned quotas stand in for the stored
// ones, and an endpoint's stored deployments are replaced by the planned ones, not added.
func TestCheckQuotaAnswersAsCreateWould(t *testing.T) {
	r := newRig(t)
	newProbes(r)
	ctx := context.Background()
	// Standard_DS2_v2 has 2 vCPUs, Standard_DS3_v2 4, Standard_DS5_v2 16, all of one family.
	r.workspace("wsp", map[string]int64{"standardDSv2Family": 10})
	if _, err := r.e.CreateEndpoint(ctx, "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 2)},
		Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		t.Fatal(err)
	}
	cluster := func(size string, maxNodes int64) *api.ComputeSpec {
		return &api.ComputeSpec{Name: "train", VMSize: size, ScaleSettings: &api.ScaleSettings{MaxNodeCount: maxNodes}}
	}
	check := func(c api.QuotaCheck) error { return r.e.CheckQuota(ctx, "wsp", c) }

	if err := check(api.QuotaCheck{Compute: cluster("Standard_DS3_v2", 1)}); err != nil {
		t.Fatalf("4 vCPUs next to the endpoint's 4 in a quota of 10: %v", err)
	}
	err := check(api.QuotaCheck{Compute: cluster("Standard_DS3_v2", 2)})
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "scale_settings.max_node_count" ||
		!strings.Contains(err.Error(), "endpoint scorer deployment blue (4 vCPUs)") || !strings.Contains(err.Error(), "lower scale_settings.max_node_count to 1") {
		t.Fatalf("8 vCPUs next to 4 in a quota of 10: %v", err)
	}
	_, created := r.e.CreateCompute(ctx, "wsp", *cluster("Standard_DS3_v2", 2), "")
	if created == nil || created.Error() != err.Error() {
		t.Fatalf("the create says %v; the check said %v", created, err)
	}
	if err := check(api.QuotaCheck{Compute: cluster("Standard_DS5_v2", 1)}); !api.IsQuotaExceeded(err) || api.FieldOf(err) != "vm_size" {
		t.Fatalf("not one 16-vCPU node fits: %v; want the error on vm_size", err)
	}
	if err := check(api.QuotaCheck{Quotas: map[string]int64{"standardDSv2Family": 12}, Compute: cluster("Standard_DS3_v2", 2)}); err != nil {
		t.Fatalf("the planned quota of 12 holds 8 next to 4: %v", err)
	}

	// The endpoint's planned deployments replace its stored ones.
	planned := func(deployments map[string]api.DeploymentSpec) error {
		return check(api.QuotaCheck{Endpoint: &api.EndpointSpec{Name: "scorer", Deployments: deployments}})
	}
	if err := planned(map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 5)}); err != nil {
		t.Fatalf("max_instances 5 x 2 vCPUs in a quota of 10, the stored 2 replaced: %v", err)
	}
	err = planned(map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 6)})
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "deployments.blue.scale_settings.max_instances" ||
		!strings.Contains(err.Error(), `deployment "blue": max_instances = 6`) || !strings.Contains(err.Error(), `workspace "wsp" has 10 of its 10 left`) {
		t.Fatalf("max_instances 6 x 2 vCPUs in a quota of 10: %v", err)
	}
	_, updated := r.e.UpdateEndpoint(ctx, "wsp", "scorer", api.EndpointUpdate{
		Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 6)}, Traffic: map[string]int64{"blue": 100}})
	if updated == nil || updated.Error() != err.Error() {
		t.Fatalf("the update says %v; the check said %v", updated, err)
	}
	err = planned(map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 2), "green": endpointstest.Deployment(4, "serve")})
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "deployments.green.instance_count" {
		t.Fatalf("a new deployment of 4 x 2 vCPUs next to blue's 4: %v", err)
	}
	// Another endpoint counts the stored one.
	err = check(api.QuotaCheck{Endpoint: &api.EndpointSpec{Name: "other", Deployments: map[string]api.DeploymentSpec{"xs": endpointstest.Autoscaled(0, 4)}}})
	if !api.IsQuotaExceeded(err) || !strings.Contains(err.Error(), "endpoint scorer deployment blue (4 vCPUs)") {
		t.Fatalf("another endpoint's 8 vCPUs next to 4: %v", err)
	}

	for _, bad := range []api.QuotaCheck{{}, {Compute: cluster("Standard_DS3_v2", 1), Endpoint: &api.EndpointSpec{Name: "scorer"}}} {
		if err := check(bad); !api.IsInvalid(err) {
			t.Errorf("check %+v: %v; want invalid", bad, err)
		}
	}
	if err := r.e.CheckQuota(ctx, "nowhere", api.QuotaCheck{Compute: cluster("Standard_DS3_v2", 1)}); !api.IsNotFound(err) {
		t.Errorf("a workspace that does not exist: %v", err)
	}
	// Nothing changed: the checks stored nothing.
	if list, err := r.e.ListComputes(ctx, "wsp"); err != nil || len(list) != 0 {
		t.Errorf("computes after the checks: %v %v", list, err)
	}
}
