package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// sizeNames checks that a sizes list holds exactly the named sizes, in order.
func sizeNames(names ...string) knownvalue.Check {
	checks := make([]knownvalue.Check, len(names))
	for i, n := range names {
		checks[i] = knownvalue.ObjectPartial(map[string]knownvalue.Check{"name": knownvalue.StringExact(n)})
	}
	return knownvalue.ListExact(checks)
}

// catalogNames lists the names of catalog sizes, in the catalog's (and so the engine's) order.
func catalogNames(sizes []catalog.Size) []string {
	names := make([]string, len(sizes))
	for i, s := range sizes {
		names[i] = s.Name
	}
	return names
}

func dataValue(addr, attr string, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(addr, tfjsonpath.New(attr), check)
}

func TestAccVMSizesDataSource_Filters(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	current := catalog.List(catalog.Filter{})
	bigGPU := catalog.List(catalog.Filter{MinGPUs: 4, MinVCPUs: 40, MinMemoryGB: 800})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccProviderConfig(e.Endpoint) + `
data "mlcompute_vm_sizes" "all" {}

data "mlcompute_vm_sizes" "nc_online" {
  family       = "standardNCSv3Family"
  compute_type = "OnlineDeployment"
}

data "mlcompute_vm_sizes" "nc_any_case" {
  family = "STANDARDNCSV3FAMILY"
}

data "mlcompute_vm_sizes" "big_gpu" {
  min_gpus      = 4
  min_vcpus     = 40
  min_memory_gb = 800
}

data "mlcompute_vm_sizes" "cpu" {
  family   = "standardDSv2Family"
  min_gpus = 0
}
`,
			ConfigStateChecks: []statecheck.StateCheck{
				dataValue("data.mlcompute_vm_sizes.all", "id", knownvalue.StringExact("/sizes")),
				dataValue("data.mlcompute_vm_sizes.all", "sizes", sizeNames(catalogNames(current)...)),
				dataValue("data.mlcompute_vm_sizes.all", "include_retired", knownvalue.Null()),

				// Standard_NC24rs_v3 cannot back online deployments.
				dataValue("data.mlcompute_vm_sizes.nc_online", "id", knownvalue.StringExact("/sizes?compute_type=OnlineDeployment&family=standardNCSv3Family")),
				dataValue("data.mlcompute_vm_sizes.nc_online", "sizes", sizeNames("Standard_NC12s_v3", "Standard_NC24s_v3", "Standard_NC6s_v3")),
				statecheck.ExpectKnownValue("data.mlcompute_vm_sizes.nc_online", tfjsonpath.New("sizes").AtSliceIndex(1), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"name":                   knownvalue.StringExact("Standard_NC24s_v3"),
					"family":                 knownvalue.StringExact("standardNCSv3Family"),
					"vcpus":                  knownvalue.Int64Exact(24),
					"gpus":                   knownvalue.Int64Exact(4),
					"gpu_model":              knownvalue.StringExact("NVIDIA Tesla V100"),
					"memory_gb":              knownvalue.Float64Exact(448),
					"os_vhd_size_mb":         knownvalue.Int64Exact(1047552),
					"max_resource_volume_mb": knownvalue.Int64Exact(3018752),
					"low_priority_capable":   knownvalue.Bool(true),
					"premium_io":             knownvalue.Bool(true),
					"supported_compute_types": knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("ComputeCluster"), knownvalue.StringExact("ComputeInstance"), knownvalue.StringExact("OnlineDeployment"),
					}),
					"requires_approval": knownvalue.Bool(true),
					"isolated":          knownvalue.Bool(true),
					"rdma_capable":      knownvalue.Bool(false),
					"retired_on":        knownvalue.Null(),
				})),

				// Families match case-insensitively; the ID uses the catalog's spelling.
				dataValue("data.mlcompute_vm_sizes.nc_any_case", "id", knownvalue.StringExact("/sizes?family=standardNCSv3Family")),
				dataValue("data.mlcompute_vm_sizes.nc_any_case", "sizes", sizeNames("Standard_NC12s_v3", "Standard_NC24rs_v3", "Standard_NC24s_v3", "Standard_NC6s_v3")),

				dataValue("data.mlcompute_vm_sizes.big_gpu", "sizes", sizeNames(catalogNames(bigGPU)...)),
				dataValue("data.mlcompute_vm_sizes.big_gpu", "sizes", knownvalue.ListPartial(map[int]knownvalue.Check{
					0: knownvalue.ObjectPartial(map[string]knownvalue.Check{"gpus": knownvalue.Int64Func(func(n int64) error {
						if n < 4 {
							return fmt.Errorf("gpus = %d, want at least 4", n)
						}
						return nil
					})}),
				})),

				// Values that do not apply are null.
				statecheck.ExpectKnownValue("data.mlcompute_vm_sizes.cpu", tfjsonpath.New("sizes").AtSliceIndex(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
					"family":     knownvalue.StringExact("standardDSv2Family"),
					"gpus":       knownvalue.Int64Exact(0),
					"gpu_model":  knownvalue.Null(),
					"retired_on": knownvalue.Null(),
				})),
			},
		}},
	})
	if len(bigGPU) == 0 || len(bigGPU) == len(current) {
		t.Errorf("the min_* filter case selects %d of %d sizes; pick bounds that narrow", len(bigGPU), len(current))
	}
}

func TestAccVMSizesDataSource_IncludeRetired(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	retiredNC := func(name string) knownvalue.Check {
		return knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"name":       knownvalue.StringExact(name),
			"family":     knownvalue.StringExact("standardNCFamily"),
			"retired_on": knownvalue.StringExact("2023-08-31"),
		})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccProviderConfig(e.Endpoint) + `
data "mlcompute_vm_sizes" "nc" {
  family          = "standardNCFamily"
  include_retired = true
}

data "mlcompute_vm_sizes" "everything" {
  include_retired = true
}
`,
			ConfigStateChecks: []statecheck.StateCheck{
				dataValue("data.mlcompute_vm_sizes.nc", "id", knownvalue.StringExact("/sizes?family=standardNCFamily&include_retired=true")),
				dataValue("data.mlcompute_vm_sizes.nc", "sizes", knownvalue.ListExact([]knownvalue.Check{
					retiredNC("Standard_NC12"), retiredNC("Standard_NC24"), retiredNC("Standard_NC24r"), retiredNC("Standard_NC6"),
				})),
				dataValue("data.mlcompute_vm_sizes.everything", "sizes", sizeNames(catalogNames(catalog.Sizes())...)),
			},
		}},
	})
}

func TestAccVMSizesDataSource_RetiredFamily(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccProviderConfig(e.Endpoint) + `
data "mlcompute_vm_sizes" "nc" {
  family = "standardNCFamily"
}
`,
			ExpectError: expectError("VM Family Retired", `"standardNCFamily" was retired on 2023-08-31`,
				`family "standardNCASv3_T4Family"`, `"Standard_NC4as_T4_v3"`, "include_retired = true"),
		}, {
			Config: testAccProviderConfig(e.Endpoint) + `
data "mlcompute_vm_sizes" "hb" {
  family          = "standardHBSFamily"
  include_retired = false
}
`,
			ExpectError: expectError("VM Family Retired", "retired on 2024-08-31", `"Standard_HB120rs_v3"`),
		}},
	})
}

func TestAccVMSizesDataSource_InvalidFilters(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	tests := []struct {
		body  string
		error []string
	}{
		{`compute_type = "Serverless"`, []string{"compute_type", `"ComputeCluster"`, `"ComputeInstance"`, `"OnlineDeployment"`, `got: "Serverless"`}},
		{`compute_type = "computecluster"`, []string{"compute_type", `got: "computecluster"`}},
		{`family = "standardXYZFamily"`, []string{"Invalid VM Size Filter", `unknown VM family "standardXYZFamily"`, "allowed families:", "standardDSv2Family"}},
		{`min_vcpus = -1`, []string{"Invalid VM Size Filter", "min_vcpus must be 0 or more, got -1"}},
		{`min_memory_gb = -0.5`, []string{"Invalid VM Size Filter", "min_memory_gb must be 0 or more, got -0.5"}},
		{`min_gpus = -2`, []string{"Invalid VM Size Filter", "min_gpus must be 0 or more, got -2"}},
	}
	var steps []resource.TestStep
	for _, tt := range tests {
		steps = append(steps, resource.TestStep{
			Config:      testAccProviderConfig(e.Endpoint) + "data \"mlcompute_vm_sizes\" \"bad\" {\n  " + tt.body + "\n}\n",
			ExpectError: expectError(tt.error...),
		})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: testAccProtoV6ProviderFactories, Steps: steps})
}
