package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/cli"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// TestMain lets the test binary act as the provider binary's hidden engine subcommand, so
// that a test of the embedded engine can start a real engine from "its own binary" exactly
// as the provider does in production, and as the online endpoint tests' model server. It also points TF_CLI_CONFIG_FILE at an existing
// file when the environment names a missing one (OpenTofu refuses a missing one).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == testScorerArg {
		os.Exit(serveTestScorer())
	}
	if len(os.Args) > 1 && os.Args[1] == "engine" {
		os.Exit(cli.Main(cli.Config{
			Use:     "provider.test engine",
			Version: "test",
			Self: func() ([]string, error) {
				exe, err := os.Executable()
				return []string{exe, "engine"}, err
			},
		}, os.Args[2:]))
	}
	cleanup := ensureCLIConfigFile()
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func ensureCLIConfigFile() (cleanup func()) {
	name := os.Getenv("TF_CLI_CONFIG_FILE")
	if name == "" {
		return func() {}
	}
	if _, err := os.Stat(name); err == nil {
		return func() {}
	}
	f, err := os.CreateTemp("", "mlcompute-tf-cli-*.tfrc")
	if err != nil {
		return func() {}
	}
	f.Close()
	os.Setenv("TF_CLI_CONFIG_FILE", f.Name())
	return func() { os.Remove(f.Name()) }
}

// testAccProtoV6ProviderFactories runs the provider in-process for terraform.
var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"mlcompute": NewProtocol6Server("test"),
}

// testAccEngine starts an in-process engine for one acceptance test, after the check that
// acceptance tests are enabled, so plain 'go test' starts none. The endpoint variables are
// cleared so the environment cannot redirect the provider.
func testAccEngine(t *testing.T, opts enginetest.Options) (*enginetest.Engine, *client.Client) {
	t.Helper()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests are skipped unless %s is set", resource.EnvTfAcc)
	}
	e := enginetest.Start(t, opts)
	return e, e.Client(t, opts.Token)
}

// testAccProviderConfig is the provider block pointing at a test engine.
func testAccProviderConfig(endpoint string) string {
	return fmt.Sprintf("provider \"mlcompute\" {\n  endpoint = %q\n}\n", endpoint)
}

func TestAccProvider_RemoteEndpointRequiresToken(t *testing.T) {
	t.Setenv(envToken, "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			// The provider refuses before it sends anything, so this host is never contacted.
			Config: `
provider "mlcompute" {
  endpoint = "http://engine.example.com:8443"
}
data "mlcompute_isolated_vm_sizes" "test" {}
`,
			ExpectError: regexp.MustCompile(`(?s)Missing Engine Token.*requires a token.*MLCOMPUTE_TOKEN`),
		}},
	})
}

func TestAccProvider_InvalidEndpoint(t *testing.T) {
	for name, endpoint := range map[string]string{
		"scheme":      "ftp://engine.example.com",
		"socket path": "unix://",
	} {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      testAccProviderConfig(endpoint) + `data "mlcompute_isolated_vm_sizes" "test" {}`,
					ExpectError: regexp.MustCompile(`Invalid Engine Endpoint`),
				}},
			})
		})
	}
}

func TestAccProvider_WrongToken(t *testing.T) {
	t.Parallel()
	e, _ := testAccEngine(t, enginetest.Options{Token: "right-token"})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
provider "mlcompute" {
  endpoint = %q
  token    = "wrong-token"
}
data "mlcompute_isolated_vm_sizes" "test" {}
`, e.Endpoint),
			ExpectError: regexp.MustCompile(`Engine Rejected Token`),
		}, {
			Config: fmt.Sprintf(`
provider "mlcompute" {
  endpoint = %q
  token    = "right-token"
}
data "mlcompute_isolated_vm_sizes" "test" {}
`, e.Endpoint),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.mlcompute_isolated_vm_sizes.test", tfjsonpath.New("id"), knownvalue.StringExact("/sizes/isolated")),
			},
		}},
	})
}

func TestAccProvider_UnreachableEndpoint(t *testing.T) {
	t.Parallel()
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests are skipped unless %s is set", resource.EnvTfAcc)
	}
	dir := t.TempDir()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      testAccProviderConfig("unix://"+filepath.Join(dir, "nobody.sock")) + `data "mlcompute_isolated_vm_sizes" "test" {}`,
			ExpectError: regexp.MustCompile(`Cannot Reach Engine`),
		}},
	})
}

// The endpoint may come from MLCOMPUTE_ENDPOINT instead of the configuration.
func TestAccProvider_EndpointFromEnvironment(t *testing.T) {
	e, _ := testAccEngine(t, enginetest.Options{})
	t.Setenv(envEndpoint, e.Endpoint)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: `data "mlcompute_isolated_vm_sizes" "test" {}`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.mlcompute_isolated_vm_sizes.test", tfjsonpath.New("sizes"), knownvalue.ListSizeExact(4)),
			},
		}},
	})
}

// Without an endpoint the provider starts the embedded engine from its own binary (here
// the test binary, which TestMain turns into the engine), as a detached process serving
// data_dir, and a workspace round-trips through it.
func TestAccProvider_EmbeddedEngine(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests are skipped unless %s is set", resource.EnvTfAcc)
	}
	t.Setenv(envEndpoint, "")
	dir, err := os.MkdirTemp("", "mlc-embedded-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Stop the engine now; deleting its data dir would also stop it within a second.
		if c, err := client.New("unix://"+filepath.Join(dir, daemon.SocketFile), "", client.WithAttempts(1)); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = c.Shutdown(ctx)
			cancel()
		}
		os.RemoveAll(dir)
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
provider "mlcompute" {
  data_dir = %q
}
resource "mlcompute_workspace" "test" {
  name = "embedded"
}
`, dir),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("mlcompute_workspace.test", tfjsonpath.New("id"), knownvalue.StringExact("/workspaces/embedded")),
			},
			Check: func(*terraform.State) error {
				for _, name := range []string{daemon.SocketFile, daemon.LogFile, daemon.StoreFile} {
					if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
						return fmt.Errorf("embedded engine left no %s in its data dir: %w", name, err)
					}
				}
				return nil
			},
		}},
	})
}

// The token error is reported on the token attribute; terraform's output cannot show that
// when token is absent from the configuration, so this test calls Configure directly.
func TestProviderConfigure_RemoteEndpointRequiresToken(t *testing.T) {
	t.Setenv(envToken, "")
	diags := configureProvider(t, map[string]string{"endpoint": "http://engine.example.com:8443"})
	if diags.ErrorsCount() != 1 {
		t.Fatalf("got %v, want one error", diags)
	}
	d, ok := diags.Errors()[0].(diag.DiagnosticWithPath)
	if !ok || !d.Path().Equal(path.Root("token")) || d.Summary() != "Missing Engine Token" {
		t.Fatalf("got %v, want Missing Engine Token on token", diags.Errors()[0])
	}
	if regexp.MustCompile(`engine\.example\.com`).FindString(d.Detail()) == "" {
		t.Errorf("detail does not name the endpoint: %s", d.Detail())
	}
}

// checkEndpoint accepts unix sockets without a token, and requires one for every TCP
// endpoint, loopback included; its messages never repeat the token.
func TestCheckEndpoint(t *testing.T) {
	tests := []struct {
		endpoint, token string
		wantAttr        string // "" when the endpoint is accepted
		wantSummary     string
	}{
		{"unix:///tmp/engine.sock", "", "", ""},
		{"http://127.0.0.1:8080", "", "token", "Missing Engine Token"},
		{"http://localhost:8080", "", "token", "Missing Engine Token"},
		{"http://[::1]:8080", "", "token", "Missing Engine Token"},
		{"http://127.0.0.1:8080", "secret", "", ""},
		{"https://engine.example.com:8443", "secret", "", ""},
		{"http://10.0.0.5:8080", "", "token", "Missing Engine Token"},
		{"https://engine.example.com", "", "token", "Missing Engine Token"},
		{"unix://", "", "endpoint", "Invalid Engine Endpoint"},
		{"tcp://127.0.0.1:8080", "", "endpoint", "Invalid Engine Endpoint"},
		{"http://", "", "endpoint", "Invalid Engine Endpoint"},
		{"http://bad host:1", "", "endpoint", "Invalid Engine Endpoint"},
	}
	for _, tt := range tests {
		attr, summary, detail := checkEndpoint(tt.endpoint, tt.token)
		if attr != tt.wantAttr || summary != tt.wantSummary {
			t.Errorf("checkEndpoint(%q, %q) = %q, %q; want %q, %q", tt.endpoint, tt.token, attr, summary, tt.wantAttr, tt.wantSummary)
		}
		if summary != "" && detail == "" {
			t.Errorf("checkEndpoint(%q): no detail", tt.endpoint)
		}
		if tt.token != "" && regexp.MustCompile(regexp.QuoteMeta(tt.token)).MatchString(detail) {
			t.Errorf("checkEndpoint(%q): detail shows the token", tt.endpoint)
		}
	}
}

// configureProvider runs the provider's Configure with the given attributes set.
func configureProvider(t *testing.T, attrs map[string]string) diag.Diagnostics {
	t.Helper()
	ctx := context.Background()
	p := New("test")()
	var sresp fwprovider.SchemaResponse
	p.Schema(ctx, fwprovider.SchemaRequest{}, &sresp)
	vals := map[string]tftypes.Value{}
	for _, name := range []string{"endpoint", "token", "data_dir", "ca_certificate"} {
		var v any
		if s, ok := attrs[name]; ok {
			v = s
		}
		vals[name] = tftypes.NewValue(tftypes.String, v)
	}
	raw := tftypes.NewValue(sresp.Schema.Type().TerraformType(ctx), vals)
	var resp fwprovider.ConfigureResponse
	p.Configure(ctx, fwprovider.ConfigureRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: raw}}, &resp)
	return resp.Diagnostics
}

// updatedInPlace checks that a step updates the resource at addr in place (never replaces
// it) and that a plan right after the apply is empty.
func updatedInPlace(addr string) resource.ConfigPlanChecks {
	return resource.ConfigPlanChecks{
		PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
		PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
	}
}

// attrPath reads an attribute written with dots as a path into state: nested attributes and
// map keys by name, list indices as numbers ("schedules.0.cron",
// "deployments.blue.request_settings.request_timeout_ms"). No attribute or map key of this
// provider is a number.
func attrPath(attr string) tfjsonpath.Path {
	parts := strings.Split(attr, ".")
	p := tfjsonpath.New(parts[0])
	for _, part := range parts[1:] {
		if i, err := strconv.Atoi(part); err == nil {
			p = p.AtSliceIndex(i)
		} else {
			p = p.AtMapKey(part)
		}
	}
	return p
}

// An engine serving loopback TCP without --token-file makes a token in its data dir; the
// provider, given that endpoint and data_dir but no token, finds it there.
func TestAccProvider_LoopbackTokenFromDataDir(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests are skipped unless %s is set", resource.EnvTfAcc)
	}
	t.Setenv(envToken, "")
	t.Setenv(envEndpoint, "")
	dir, err := os.MkdirTemp("", "mlc-tok-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	addr := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{
			DataDir: dir, Listen: "tcp://127.0.0.1:0", AgentArgv: []string{os.Args[0], "engine", "node-agent"},
			Ready: func(a string) { addr <- a },
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	var endpoint string
	select {
	case a := <-addr:
		endpoint = "http://" + a
	case err := <-done:
		t.Fatalf("engine did not start: %v", err)
	}
	config := fmt.Sprintf("provider \"mlcompute\" {\n  endpoint = %q\n  data_dir = %q\n}\ndata \"mlcompute_isolated_vm_sizes\" \"test\" {}\n", endpoint, dir)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.mlcompute_isolated_vm_sizes.test", tfjsonpath.New("id"), knownvalue.StringExact("/sizes/isolated")),
			},
		}},
	})
}

// A loopback TCP endpoint without a token: a token file in data_dir that others can read
// is refused on token with the fix, and none at all is a missing token. Neither reaches
// the endpoint, so none needs to run.
func TestProviderConfigure_LoopbackTokenFile(t *testing.T) {
	t.Setenv(envToken, "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, daemon.TokenFile), []byte("tok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct{ dataDir, summary, phrase string }{
		"readable by others": {dir, "Cannot Use Engine Token File", "chmod 600"},
		"no token file":      {t.TempDir(), "Missing Engine Token", daemon.TokenFile},
	} {
		t.Run(name, func(t *testing.T) {
			diags := configureProvider(t, map[string]string{"endpoint": "http://127.0.0.1:1", "data_dir": tt.dataDir})
			if diags.ErrorsCount() != 1 {
				t.Fatalf("got %v, want one error", diags)
			}
			d, ok := diags.Errors()[0].(diag.DiagnosticWithPath)
			if !ok || !d.Path().Equal(path.Root("token")) || d.Summary() != tt.summary || !strings.Contains(d.Detail(), tt.phrase) {
				t.Fatalf("got %v; want %s on token, mentioning %q", diags.Errors()[0], tt.summary, tt.phrase)
			}
		})
	}
}
