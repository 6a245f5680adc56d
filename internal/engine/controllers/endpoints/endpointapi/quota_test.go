package endpointapi

import (
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/quota"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

func TestDeploymentQuota(t *testing.T) {
	size, err := validation.VMSize("f", "Standard_DS2_v2", catalog.OnlineDeployment)
	if err != nil {
		t.Fatal(err)
	}
	scaled := func(max int64) api.DeploymentSpec {
		return api.DeploymentSpec{InstanceCount: 1, ScaleSettings: &api.EndpointScaleSettings{Type: api.ScaleTypeTargetUtilization, MaxInstances: max}}
	}
	if err := deploymentQuota("lab", "d", scaled(4), size, 10, 18, nil); err != nil {
		t.Fatalf("4 x 2 vCPUs with 10 of 18 used: %v", err)
	}
	err = deploymentQuota("lab", "d", scaled(5), size, 10, 18, []quota.Holder{{Name: "gpu", VCPUs: 10}})
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "deployments.d.scale_settings.max_instances" || !strings.Contains(err.Error(), "needs 10 vCPUs") ||
		!strings.Contains(err.Error(), `deployment "d": max_instances = 5`) ||
		!strings.Contains(err.Error(), `workspace "lab" has 8 of its 18 left (already used by gpu (10 vCPUs)); lower max_instances to 4`) {
		t.Fatalf("5 x 2 vCPUs with 10 of 18 used: %v", err)
	}
	if err := deploymentQuota("lab", "d", scaled(1<<62), size, 0, 100, nil); !api.IsQuotaExceeded(err) {
		t.Fatalf("overflow: %v", err)
	}
	// A deployment of a fixed count holds instance_count.
	err = deploymentQuota("lab", "d", api.DeploymentSpec{InstanceCount: 5}, size, 10, 18, nil)
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "deployments.d.instance_count" || !strings.Contains(err.Error(), "instance_count = 5") {
		t.Fatalf("instance_count 5 x 2 vCPUs with 10 of 18 used: %v", err)
	}
}
