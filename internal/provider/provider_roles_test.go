package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// A reader's apply fails with the permission it lacks and makes nothing; a contributor of
// the workspace applies and destroys it; the audit log holds both.
func TestAccProvider_TokenRoles(t *testing.T) {
	t.Parallel()
	e, op := testAccEngine(t, enginetest.Options{Token: "operator-token"})
	ctx := context.Background()
	secret := func(spec api.TokenSpec) string {
		created, err := op.CreateToken(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		return created.Secret
	}
	reader := secret(api.TokenSpec{Name: "viewer", Role: api.RoleReader})
	contributor := secret(api.TokenSpec{Name: "ci", Role: api.RoleContributor, Workspaces: []string{"team-roles"}})
	config := func(token string) string {
		return fmt.Sprintf(`
provider "mlcompute" {
  endpoint = %q
  token    = %q
}
resource "mlcompute_workspace" "test" {
  name = "team-roles"
}
`, e.Endpoint, token)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := op.GetWorkspace(ctx, "team-roles"); !api.IsNotFound(err) {
				return fmt.Errorf("workspace after destroy: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config:      config(reader),
			ExpectError: regexp.MustCompile(`(?s)lacks the permission.*write on workspace "team-roles"`),
		}, {
			Config: config(contributor),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("mlcompute_workspace.test", tfjsonpath.New("id"), knownvalue.StringExact("/workspaces/team-roles")),
			},
			Check: func(*terraform.State) error {
				entries, err := op.Audit(ctx)
				if err != nil {
					return err
				}
				var seen []string
				for _, en := range entries {
					seen = append(seen, en.Token+" "+en.Result+" "+en.Action)
				}
				all := strings.Join(seen, "\n")
				for _, want := range []string{"viewer denied POST /v1/workspaces", "ci allowed POST /v1/workspaces"} {
					if !strings.Contains(all, want) {
						return fmt.Errorf("audit log lacks %q:\n%s", want, all)
					}
				}
				return nil
			},
		}, {
			Config:           config(contributor),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
		}},
	})
}
