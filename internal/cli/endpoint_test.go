package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest/scorer"
)

// The test binary is also the node agent (through the CLI's own hidden command), the
// engine started as a separate process ("serve") and the deployments' model server.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "node-agent":
			os.Exit(Main(Config{Use: "cli.test"}, os.Args[1:]))
		case "serve":
			exe, _ := os.Executable()
			os.Exit(Main(Config{Use: "cli.test", Version: "test", Self: func() ([]string, error) { return []string{exe}, nil }}, os.Args[1:]))
		case "scorer":
			if err := scorer.Serve(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "scorer:", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(m.Run())
}

// runCLI runs the command tree against the engine and returns stdout, stderr and the error.
func runCLI(e *enginetest.Engine, args ...string) (string, string, error) {
	root := NewRootCommand(Config{Use: "mlcompute", Version: "test"})
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"--endpoint", e.Endpoint}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestEndpointCommands(t *testing.T) {
	exe, _ := os.Executable()
	e := enginetest.Start(t, enginetest.Options{AgentArgv: []string{exe, "node-agent"}})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team"}); err != nil {
		t.Fatal(err)
	}
	probe := &api.Probe{Path: "/health", InitialDelay: "PT0S", Period: "PT1S", Timeout: "PT1S"}
	dep := func(name string) api.DeploymentSpec {
		return api.DeploymentSpec{InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: []string{exe, "scorer"},
			EnvironmentVariables: map[string]string{"SCORER_NAME": name}, LivenessProbe: probe, ReadinessProbe: probe}
	}
	if _, err := c.CreateEndpoint(ctx, "team", api.EndpointSpec{
		Name: "churn", Deployments: map[string]api.DeploymentSpec{"blue": dep("blue"), "green": dep("green")},
		Traffic: map[string]int64{"blue": 100},
	}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ep, err := c.GetEndpoint(ctx, "team", "churn")
		if err != nil {
			t.Fatal(err)
		}
		if ep.ProvisioningState == api.ProvisioningSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint never ready: %+v", ep)
		}
	}

	out, _, err := runCLI(e, "endpoint", "list", "--workspace", "team")
	if err != nil || !strings.Contains(out, "churn") || !strings.Contains(out, "Succeeded") || !strings.Contains(out, "blue=100%") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, _, err = runCLI(e, "endpoint", "show", "--workspace", "team", "churn", "-o", "json")
	var shown api.Endpoint
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || shown.Deployments["green"].ReadyInstances != 1 {
		t.Fatalf("show -o json: %v\n%s", err, out)
	}
	if strings.Contains(out, "primary_key") {
		t.Fatal("show prints a key")
	}
	if shown.Deployments["green"].DesiredInstances != 1 {
		t.Fatalf("show -o json: desired_instances %d; want 1\n%s", shown.Deployments["green"].DesiredInstances, out)
	}
	out, _, err = runCLI(e, "endpoint", "show", "--workspace", "team", "churn")
	if err != nil || !strings.Contains(out, "READY/DESIRED") || !strings.Contains(out, "HELD") || !strings.Contains(out, "green       fixed  1/1") {
		t.Fatalf("show: %v\n%s", err, out)
	}

	out, _, err = runCLI(e, "endpoint", "invoke", "--workspace", "team", "churn", "--data", `{"rows": [1, 2]}`)
	var res map[string]any
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res["deployment"] != "blue" {
		t.Fatalf("invoke: %v\n%s", err, out)
	}
	out, _, err = runCLI(e, "endpoint", "invoke", "--workspace", "team", "churn", "--deployment", "green", "--data", `{}`)
	if err != nil || !strings.Contains(out, `"deployment":"green"`) {
		t.Fatalf("invoke --deployment green: %v\n%s", err, out)
	}
	_, errOut, err := runCLI(e, "endpoint", "invoke", "--workspace", "team", "churn", "--deployment", "red", "--data", `{}`)
	if err == nil || !strings.Contains(errOut, "scoring request failed: 404 Not Found") || !strings.Contains(errOut, "red") {
		t.Fatalf("invoke an unknown deployment: %v\n%s", err, errOut)
	}

	before, _ := c.GetEndpointKeys(ctx, "team", "churn")
	out, _, err = runCLI(e, "endpoint", "regenerate-keys", "--workspace", "team", "churn", "--key-type", "secondary")
	if err != nil || !strings.Contains(out, "regenerated the secondary key of churn") || strings.Contains(out, before.PrimaryKey) {
		t.Fatalf("regenerate-keys: %v\n%s", err, out)
	}
	out, _, err = runCLI(e, "endpoint", "get-credentials", "--workspace", "team", "churn")
	var keys api.EndpointKeys
	if err != nil || json.Unmarshal([]byte(out), &keys) != nil || keys.PrimaryKey != before.PrimaryKey || keys.SecondaryKey == before.SecondaryKey {
		t.Fatalf("get-credentials after regenerating the secondary key: %v\n%s", err, out)
	}
	if _, _, err := runCLI(e, "endpoint", "regenerate-keys", "--workspace", "team", "churn", "--key-type", "both"); err == nil || !strings.Contains(err.Error(), "allowed values: primary, secondary") {
		t.Fatalf("regenerate-keys --key-type both: %v", err)
	}

	// aml_token: invoke fetches a token by itself; get-token prints one.
	if _, err := c.UpdateEndpoint(ctx, "team", "churn", api.EndpointUpdate{AuthMode: api.AuthModeAMLToken,
		Deployments: map[string]api.DeploymentSpec{"blue": dep("blue"), "green": dep("green")}, Traffic: map[string]int64{"blue": 100}}); err != nil {
		t.Fatal(err)
	}
	if out, _, err = runCLI(e, "endpoint", "invoke", "--workspace", "team", "churn", "--data", `{}`); err != nil || !strings.Contains(out, `"deployment":"blue"`) {
		t.Fatalf("invoke with a token: %v\n%s", err, out)
	}
	out, _, err = runCLI(e, "endpoint", "get-token", "--workspace", "team", "churn")
	var tok api.EndpointToken
	if err != nil || json.Unmarshal([]byte(out), &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("get-token: %v\n%s", err, out)
	}
	if err := c.DeleteEndpoint(ctx, "team", "churn"); err != nil {
		t.Fatal(err)
	}
}
