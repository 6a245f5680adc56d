package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive/imagearchivetest"
)

const testAccEnvironmentAddr = "mlcompute_environment.test"

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// testAccEnvironmentConfig is the provider, a workspace "envs" and one environment with
// the given body (name and workspace_id included).
func testAccEnvironmentConfig(endpoint, body string) string {
	return testAccWorkspaceConfig(endpoint, `name = "envs"`) + `
resource "mlcompute_environment" "test" {
  name         = "train"
  workspace_id = mlcompute_workspace.test.id
` + body + "\n}\n"
}

func envValue(p tfjsonpath.Path, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(testAccEnvironmentAddr, p, check)
}

// engineEnvironmentHash checks the engine holds the environment with the state's hash.
func engineEnvironmentHash(c *client.Client) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		env, err := c.GetEnvironment(context.Background(), "envs", "train")
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		if got := s.RootModule().Resources[testAccEnvironmentAddr].Primary.Attributes["content_hash"]; got != env.ContentHash {
			return fmt.Errorf("state content_hash %s; engine %s", got, env.ContentHash)
		}
		return nil
	}
}

func TestAccEnvironment_PythonUpdateInPlaceAndImport(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	hash := statecheck.CompareValue(compare.ValuesDiffer())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccEnvironmentConfig(e.Endpoint, `
  python = {
    requirements = ["mlctest==0.1"]
    find_links   = ["/srv/wheels"]
  }
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				envValue(tfjsonpath.New("id"), knownvalue.StringExact("/workspaces/envs/environments/train")),
				envValue(tfjsonpath.New("python").AtMapKey("python"), knownvalue.StringExact("python3")),
				envValue(tfjsonpath.New("python").AtMapKey("index_url"), knownvalue.StringExact("")),
				envValue(tfjsonpath.New("python").AtMapKey("requirements"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("mlctest==0.1")})),
				envValue(tfjsonpath.New("user_managed"), knownvalue.Null()),
				envValue(tfjsonpath.New("content_hash"), knownvalue.StringRegexp(hex64)),
				envValue(tfjsonpath.New("created_on"), knownvalue.StringExact("2026-01-05T09:00:00Z")),
				hash.AddStateValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
			},
			Check: engineEnvironmentHash(c),
		}, {
			Config: testAccEnvironmentConfig(e.Endpoint, `
  python = {
    requirements = ["mlctest==0.2"]
    find_links   = ["/srv/wheels"]
  }
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				hash.AddStateValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
				envValue(tfjsonpath.New("created_on"), knownvalue.StringExact("2026-01-05T09:00:00Z")),
			},
			Check: engineEnvironmentHash(c),
		}, {
			ResourceName:      testAccEnvironmentAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/envs/environments/train",
			ImportStateVerify: true,
		}},
	})
}

func TestAccEnvironment_UserManaged(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccEnvironmentConfig(e.Endpoint, `
  user_managed = { interpreter_path = "/opt/conda/envs/x/bin/python" }
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				envValue(tfjsonpath.New("user_managed").AtMapKey("interpreter_path"), knownvalue.StringExact("/opt/conda/envs/x/bin/python")),
				envValue(tfjsonpath.New("python"), knownvalue.Null()),
			},
		}, {
			ResourceName:      testAccEnvironmentAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/envs/environments/train",
			ImportStateVerify: true,
		}},
	})
}

func TestAccEnvironment_BadInputs(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	for name, tc := range map[string]struct{ body, want string }{
		"neither":          {``, "Invalid Attribute Combination"},
		"both":             {`python = {}` + "\n" + `user_managed = { interpreter_path = "/usr/bin/python3" }`, "Invalid Attribute Combination"},
		"requirement":      {`python = { requirements = ["numpy=1"] }`, "is not a requirement specifier"},
		"pip option":       {`python = { requirements = ["-r reqs.txt"] }`, "is not a requirement specifier"},
		"find_links":       {`python = { find_links = ["wheels"] }`, "must be an absolute directory"},
		"index_url":        {`python = { index_url = "ftp://x" }`, "must be an http:// or https:// URL"},
		"python":           {`python = { python = "python3 -u" }`, "must be a command name"},
		"interpreter_path": {`user_managed = { interpreter_path = "python3" }`, "must be an absolute path"},
	} {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      testAccEnvironmentConfig(e.Endpoint, tc.body),
					PlanOnly:    true,
					ExpectError: expectError(tc.want),
				}},
			})
		})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      testAccProviderConfig(e.Endpoint) + `resource "mlcompute_environment" "test" {` + "\n" + `name = "-bad"` + "\n" + `workspace_id = "/workspaces/envs"` + "\n" + `python = {}` + "\n}\n",
			PlanOnly:    true,
			ExpectError: expectError("Invalid Environment Name"),
		}},
	})
}

// A container environment from an image archive: the provider reads the archive at plan,
// so a new archive at the same path is an update in place with a new image_digest and
// content_hash; the same image from another archive (another path, another layout) keeps
// the hash. Import reads back everything.
func TestAccEnvironment_ContainerArchiveUpdateInPlaceAndImport(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	dir := t.TempDir()
	archive, oci := filepath.Join(dir, "train.tar"), filepath.Join(dir, "train-oci.tar")
	v1 := imagearchivetest.Docker(t, archive, "example.com/train:1", imagearchivetest.Layer{"usr/lib/mlctest/VERSION": "1.0"})
	var v2 string
	body := func(file string) string {
		return fmt.Sprintf(`
  container = {
    image_archive = %q
    python = { requirements = ["mlctest==1.0"], find_links = ["/srv/wheels"] }
  }
`, file)
	}
	differ := statecheck.CompareValue(compare.ValuesDiffer())
	same := statecheck.CompareValue(compare.ValuesSame())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccEnvironmentConfig(e.Endpoint, body(archive)),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue(testAccEnvironmentAddr, tfjsonpath.New("container").AtMapKey("image_digest"), knownvalue.StringExact(v1)),
				},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				envValue(tfjsonpath.New("container").AtMapKey("image_digest"), knownvalue.StringExact(v1)),
				envValue(tfjsonpath.New("container").AtMapKey("image"), knownvalue.Null()),
				envValue(tfjsonpath.New("container").AtMapKey("python").AtMapKey("python"), knownvalue.StringExact("python3")),
				envValue(tfjsonpath.New("python"), knownvalue.Null()),
				envValue(tfjsonpath.New("content_hash"), knownvalue.StringRegexp(hex64)),
				differ.AddStateValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
			},
			Check: engineEnvironmentHash(c),
		}, {
			// A new image in the same file: the configuration is unchanged.
			PreConfig: func() {
				v2 = imagearchivetest.Docker(t, archive, "example.com/train:1", imagearchivetest.Layer{"usr/lib/mlctest/VERSION": "2.0"})
			},
			Config: testAccEnvironmentConfig(e.Endpoint, body(archive)),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
				},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				differ.AddStateValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
				same.AddStateValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
				envValue(tfjsonpath.New("created_on"), knownvalue.StringExact("2026-01-05T09:00:00Z")),
			},
			Check: resource.ComposeTestCheckFunc(engineEnvironmentHash(c),
				resource.TestCheckResourceAttrPtr(testAccEnvironmentAddr, "container.image_digest", &v2)),
		}, {
			// The same image as an OCI layout at another path: the path is not hashed.
			PreConfig: func() {
				if d := imagearchivetest.OCI(t, oci, "example.com/train:1", imagearchivetest.Layer{"usr/lib/mlctest/VERSION": "2.0"}); d != v2 {
					t.Fatalf("the OCI layout of the image has config %s; the Docker archive %s", d, v2)
				}
			},
			Config: testAccEnvironmentConfig(e.Endpoint, body(oci)),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				same.AddStateValue(testAccEnvironmentAddr, tfjsonpath.New("content_hash")),
				envValue(tfjsonpath.New("container").AtMapKey("image_archive"), knownvalue.StringExact(oci)),
			},
			Check: engineEnvironmentHash(c),
		}, {
			ResourceName:      testAccEnvironmentAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/envs/environments/train",
			ImportStateVerify: true,
		}},
	})
}

// A container environment from an image reference: no digest is read, and the plan after
// apply is empty; a switch to a python environment, and from it to an archive, are updates
// in place.
func TestAccEnvironment_ContainerImage(t *testing.T) {
	t.Parallel()
	e, c := testAccEngine(t, enginetest.Options{})
	archive := filepath.Join(t.TempDir(), "train.tar")
	digest := imagearchivetest.Docker(t, archive, "example.com/train:1", imagearchivetest.Layer{"usr/lib/mlctest/VERSION": "1.0"})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccEnvironmentConfig(e.Endpoint, `
  container = { image = "registry.example.com/team/train:1.4" }
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				envValue(tfjsonpath.New("container").AtMapKey("image"), knownvalue.StringExact("registry.example.com/team/train:1.4")),
				envValue(tfjsonpath.New("container").AtMapKey("image_digest"), knownvalue.Null()),
				envValue(tfjsonpath.New("container").AtMapKey("image_archive"), knownvalue.Null()),
				envValue(tfjsonpath.New("container").AtMapKey("python"), knownvalue.Null()),
			},
			Check: engineEnvironmentHash(c),
		}, {
			ResourceName:      testAccEnvironmentAddr,
			ImportState:       true,
			ImportStateId:     "/workspaces/envs/environments/train",
			ImportStateVerify: true,
		}, {
			Config: testAccEnvironmentConfig(e.Endpoint, `
  python = { requirements = ["mlctest==0.1"] }
`),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{envValue(tfjsonpath.New("container"), knownvalue.Null())},
			Check:             engineEnvironmentHash(c),
		}, {
			// From python to an archive: the digest is read as for a new environment.
			Config: testAccEnvironmentConfig(e.Endpoint, fmt.Sprintf(`
  container = { image_archive = %q }
`, archive)),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(testAccEnvironmentAddr, plancheck.ResourceActionUpdate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				envValue(tfjsonpath.New("container").AtMapKey("image_digest"), knownvalue.StringExact(digest)),
				envValue(tfjsonpath.New("python"), knownvalue.Null()),
			},
			Check: engineEnvironmentHash(c),
		}},
	})
}

func TestAccEnvironment_ContainerBadInputs(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{})
	dir := t.TempDir()
	notImage := filepath.Join(dir, "Dockerfile")
	if err := os.WriteFile(notImage, []byte("FROM python:3.11\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.tar")
	imagearchivetest.Docker(t, good, "t:1", imagearchivetest.Layer{"a": "b"})
	for name, tc := range map[string]struct{ body, want string }{
		"not an image":      {fmt.Sprintf(`container = { image_archive = %q }`, notImage), `(?s)container\.image_archive.*not an OCI or Docker image archive: the file is not a tar archive`},
		"missing archive":   {fmt.Sprintf(`container = { image_archive = %q }`, filepath.Join(dir, "absent.tar")), `(?s)Invalid Image Archive.*no such\s+file`},
		"image and archive": {fmt.Sprintf(`container = {`+"\n"+`image = "t:1"`+"\n"+`image_archive = %q`+"\n}", good), "Invalid Attribute Combination"},
		"no image":          {`container = {}`, "Invalid Attribute Combination"},
		"with python":       {`python = {}` + "\n" + `container = { image = "t:1" }`, "Invalid Attribute Combination"},
		"image reference":   {`container = { image = "Team/Train:1" }`, "is not an image reference"},
		"container python":  {`container = {` + "\n" + `image = "t:1"` + "\n" + `python = { requirements = ["numpy=1"] }` + "\n}", "is not a requirement specifier"},
		"digest is read":    {`container = {` + "\n" + `image = "t:1"` + "\n" + `image_digest = "sha256:00"` + "\n}", "Invalid Configuration for Read-Only Attribute"},
	} {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      testAccEnvironmentConfig(e.Endpoint, tc.body),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(tc.want),
				}},
			})
		})
	}
}
