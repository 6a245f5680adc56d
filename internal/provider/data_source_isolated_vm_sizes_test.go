package provider

import (
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

func TestAccIsolatedVMSizesDataSource_Basic(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	const addr = "data.mlcompute_isolated_vm_sizes.test"

	// The list is sorted by name; find where each required size sits in it.
	names := catalogNames(catalog.Isolated())
	required := map[string]bool{ // name -> RDMA capable
		"Standard_M128ms":    false,
		"Standard_F72s_v2":   false,
		"Standard_NC24s_v3":  false,
		"Standard_NC24rs_v3": true,
	}
	members := map[int]knownvalue.Check{}
	for name, rdma := range required {
		i := slices.Index(names, name)
		if i < 0 {
			t.Fatalf("the catalog lists no isolated size %s", name)
		}
		members[i] = knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"name":         knownvalue.StringExact(name),
			"isolated":     knownvalue.Bool(true),
			"rdma_capable": knownvalue.Bool(rdma),
			"retired_on":   knownvalue.Null(),
		})
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccProviderConfig(e.Endpoint) + `data "mlcompute_isolated_vm_sizes" "test" {}`,
			ConfigStateChecks: []statecheck.StateCheck{
				dataValue(addr, "id", knownvalue.StringExact("/sizes/isolated")),
				dataValue(addr, "sizes", sizeNames(names...)),
				dataValue(addr, "sizes", knownvalue.ListPartial(members)),
			},
		}},
	})
}
