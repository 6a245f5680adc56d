//go:build unix

package e2e

import (
	"strings"
	"testing"
)

// destroyBase is what each case has applied before its bad configuration: a workspace
// (with a small quota of the DS v2 family) that the destroy must remove.
const destroyBase = requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name   = "e2e-team"
  quotas = { standardDSv2Family = 8 }
}
`

// TestE2E_DestroyWhateverEngineChecksSay: `terraform destroy` works whatever the engine's
// plan-time checks say (DESIGN 10). Terraform plans the whole configuration before a
// destroy and fails the destroy on any error of that plan, so each engine-dependent check
// of the provider (the engine's quota, the catalog, the served locations, the engine's idle
// minimum) is tried here: a plan still reports its error, and the destroy then removes the
// workspace. Other errors still fail the destroy: past a data source look-up's,
// `destroy -refresh=false` removes the workspace; a misspelled object key, found when
// terraform validates the configuration, must be corrected first.
func TestE2E_DestroyWhateverEngineChecksSay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// applied first, when set; the bad configuration is then destroyBase + bad
		first string
		bad   string
		// refused is the error a plan of the bad configuration reports
		refused string
		// shows is set for an error that does not depend on the engine: it fails the
		// destroy too (DESIGN 10). `destroy -refresh=false` is the way past a plan's error;
		// an error of the configuration's validation (validated) has to be corrected.
		shows, validated bool
	}{
		{
			// A new user's case: one apply creates the workspace and the quota refuses the
			// cluster.
			name: "quota refused at apply",
			bad: `
resource "mlcompute_compute_cluster" "cpu" {
  name           = "cpu"
  workspace_id   = mlcompute_workspace.ws.id
  vm_size        = "Standard_DS3_v2"
  scale_settings = { min_node_count = 0, max_node_count = 4 }
}
`,
			refused: "Workspace Quota Exceeded",
		},
		{
			name:  "cluster size outside the catalog",
			first: destroyBase,
			bad: `
resource "mlcompute_compute_cluster" "cpu" {
  name           = "cpu"
  workspace_id   = mlcompute_workspace.ws.id
  vm_size        = "Standard_XY9_v9"
  scale_settings = { min_node_count = 0, max_node_count = 1 }
}
`,
			refused: "Standard_XY9_v9",
		},
		{
			name:  "location the engine does not serve",
			first: destroyBase,
			bad: `
resource "mlcompute_workspace" "far" {
  name     = "far"
  location = "mars"
}
`,
			refused: "Location Not Served",
		},
		{
			name:  "instance size outside the catalog",
			first: destroyBase,
			bad: `
resource "mlcompute_compute_instance" "alice" {
  name         = "alice"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_XY9_v9"
}
`,
			refused: "Standard_XY9_v9",
		},
		{
			name:  "idle time below the engine's minimum",
			first: destroyBase,
			bad: `
resource "mlcompute_compute_instance" "alice" {
  name                      = "alice"
  workspace_id              = mlcompute_workspace.ws.id
  vm_size                   = "Standard_DS3_v2"
  idle_time_before_shutdown = "PT5M"
}
`,
			refused: "Idle Time Below The Engine's Minimum",
		},
		{
			name:  "endpoint with an instance type outside the catalog",
			first: destroyBase,
			bad: `
resource "mlcompute_online_endpoint" "churn" {
  name         = "churn"
  workspace_id = mlcompute_workspace.ws.id
  deployments = {
    blue = {
      instance_type = "Standard_XY9_v9"
      code_path     = path.module
      command       = ["python3", "score.py"]
    }
  }
  traffic = { blue = 100 }
}
`,
			refused: "Standard_XY9_v9",
		},
		{
			// Terraform drops the unknown key before the provider sees it; the provider
			// reads it from the configuration's text (object_keys.go).
			name:  "misspelled key in an object value",
			first: destroyBase,
			bad: `
resource "mlcompute_compute_cluster" "cpu" {
  name           = "cpu"
  workspace_id   = mlcompute_workspace.ws.id
  vm_size        = "Standard_DS3_v2"
  scale_settings = { max_node_count = 1, min_node_countt = 1 }
}
`,
			refused:   "Unknown Attribute In Object",
			shows:     true,
			validated: true,
		},
		{
			name:  "data source look-up of a compute that does not exist",
			first: destroyBase,
			bad: `
data "mlcompute_compute" "gone" {
  workspace_id = mlcompute_workspace.ws.id
  name         = "gone"
}
`,
			refused: "gone",
			shows:   true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newUser(t)
			if tc.first != "" {
				u.writeConfig(tc.first)
				u.mustTerraform("apply", "-auto-approve")
				u.writeConfig(tc.first + tc.bad)
			} else {
				u.writeConfig(destroyBase + tc.bad)
				out, code := u.terraform("apply", "-auto-approve")
				if code == 0 || !strings.Contains(out, tc.refused) {
					t.Fatalf("apply: exit %d; want it refused with %q:\n%s", code, tc.refused, out)
				}
			}
			if got := len(u.workspaces()); got != 1 {
				t.Fatalf("engine holds %d workspaces before the destroy; want 1", got)
			}
			out, code := u.terraform("plan")
			if code == 0 || !strings.Contains(out, tc.refused) {
				t.Fatalf("plan: exit %d; want an error naming %q:\n%s", code, tc.refused, out)
			}
			destroy := []string{"destroy", "-auto-approve"}
			if tc.shows {
				if out, code := u.terraform(destroy...); code == 0 || !strings.Contains(out, tc.refused) {
					t.Fatalf("destroy: exit %d; want the error %q to show:\n%s", code, tc.refused, out)
				}
				if tc.validated {
					u.writeConfig(tc.first) // corrected
				} else {
					destroy = append(destroy, "-refresh=false")
				}
			}
			if out, code := u.terraform(destroy...); code != 0 {
				t.Fatalf("%v: exit %d:\n%s", destroy, code, out)
			}
			if got := len(u.workspaces()); got != 0 {
				t.Fatalf("engine holds %d workspaces after the destroy; want 0", got)
			}
			// The same through apply -destroy.
			u.writeConfig(destroyBase)
			u.mustTerraform("apply", "-auto-approve")
			u.writeConfig(destroyBase + tc.bad)
			applyDestroy := []string{"apply", "-destroy", "-auto-approve"}
			if tc.shows && !tc.validated {
				applyDestroy = append(applyDestroy, "-refresh=false")
			}
			if tc.validated {
				u.writeConfig(tc.first)
			}
			if out, code := u.terraform(applyDestroy...); code != 0 {
				t.Fatalf("%v: exit %d:\n%s", applyDestroy, code, out)
			}
			if got := len(u.workspaces()); got != 0 {
				t.Fatalf("engine holds %d workspaces after apply -destroy; want 0", got)
			}
		})
	}
}
