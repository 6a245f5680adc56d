package enginetest_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest/scorer"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// The test binary is also the node agent and the deployments' model server.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "node-agent":
			fs := flag.NewFlagSet("node-agent", flag.ExitOnError)
			dir := fs.String("dir", "", "node dir")
			_ = fs.Parse(os.Args[2:])
			if err := nodeagent.Run(context.Background(), *dir, hclog.NewNullLogger()); err != nil {
				fmt.Fprintln(os.Stderr, "node agent:", err)
				os.Exit(1)
			}
			os.Exit(0)
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

func fastProbe() *api.Probe {
	return &api.Probe{Path: "/health", InitialDelay: "PT0S", Period: "PT1S", Timeout: "PT1S", SuccessThreshold: 1, FailureThreshold: 30}
}

func deployment(t *testing.T, name string) api.DeploymentSpec {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return api.DeploymentSpec{
		InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: []string{exe, "scorer"},
		EnvironmentVariables: map[string]string{"SCORER_NAME": name},
		LivenessProbe:        fastProbe(), ReadinessProbe: fastProbe(),
	}
}

// waitState polls the endpoint until it reaches state; the limit only keeps a broken
// engine from hanging the test.
func waitState(t *testing.T, c *client.Client, ws, name, state string) *api.Endpoint {
	t.Helper()
	var ep *api.Endpoint
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if ep, err = c.GetEndpoint(context.Background(), ws, name); err != nil {
			t.Fatal(err)
		}
		if ep.ProvisioningState == state {
			return ep
		}
	}
	t.Fatalf("endpoint never %s: %+v", state, ep)
	return nil
}

func post(t *testing.T, uri, credential, deployment string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", uri, strings.NewReader(`{"x": 1}`))
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	if deployment != "" {
		req.Header.Set("azureml-model-deployment", deployment)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	return res.StatusCode, body
}

func TestEndpointServesRealHTTP(t *testing.T) {
	exe, _ := os.Executable()
	e := enginetest.Start(t, enginetest.Options{AgentArgv: []string{exe, "node-agent"}})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team"}); err != nil {
		t.Fatal(err)
	}
	ep, err := c.CreateEndpoint(ctx, "team", api.EndpointSpec{
		Name:        "churn",
		Deployments: map[string]api.DeploymentSpec{"blue": deployment(t, "blue"), "green": deployment(t, "green")},
		Traffic:     map[string]int64{"blue": 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := e.ScoringURL + "/churn/score"; ep.ScoringURI != want {
		t.Fatalf("scoring_uri %q; want %q", ep.ScoringURI, want)
	}
	waitState(t, c, "team", "churn", api.ProvisioningSucceeded)
	keys, err := c.GetEndpointKeys(ctx, "team", "churn")
	if err != nil {
		t.Fatal(err)
	}

	code, body := post(t, ep.ScoringURI, keys.PrimaryKey, "")
	if code != 200 || body["deployment"] != "blue" || body["body"].(map[string]any)["x"] != 1.0 {
		t.Fatalf("score: %d %v; want 200 from blue echoing the body", code, body)
	}
	if code, body = post(t, ep.ScoringURI, keys.SecondaryKey, "green"); code != 200 || body["deployment"] != "green" {
		t.Fatalf("pinned to green with the secondary key: %d %v", code, body)
	}
	for _, cred := range []string{"", "wrong", keys.PrimaryKey + "x"} {
		if code, _ := post(t, ep.ScoringURI, cred, ""); code != http.StatusUnauthorized {
			t.Fatalf("credential %q: %d; want 401", cred, code)
		}
	}
	// A regenerated key replaces the old one at once.
	after, err := c.RegenerateEndpointKeys(ctx, "team", "churn", api.KeyPrimary)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, ep.ScoringURI, keys.PrimaryKey, ""); code != http.StatusUnauthorized {
		t.Fatalf("old primary key after regeneration: %d; want 401", code)
	}
	if code, _ := post(t, ep.ScoringURI, after.PrimaryKey, ""); code != 200 {
		t.Fatalf("new primary key: %d; want 200", code)
	}

	// Mirror: half of blue's live requests are copied to green; clients only ever see blue.
	green := deployment(t, "green")
	green.RequestSettings = &api.RequestSettings{MaxConcurrentRequestsPerInstance: 32}
	mirror := api.EndpointUpdate{Deployments: map[string]api.DeploymentSpec{"blue": deployment(t, "blue"), "green": green},
		Traffic: map[string]int64{"blue": 100}, MirrorTraffic: map[string]int64{"green": 50}}
	if _, err := c.UpdateEndpoint(ctx, "team", "churn", mirror); err != nil {
		t.Fatal(err)
	}
	stats0 := e.ScoringStats("churn")["green"]
	for range 200 {
		if code, body := post(t, ep.ScoringURI, after.PrimaryKey, ""); code != 200 || body["deployment"] != "blue" {
			t.Fatalf("with a mirror: %d %v; want every answer from blue", code, body)
		}
	}
	// 200 draws at 50%: 4.5 sigma is about 32 copies either side of 100. A copy that finds
	// green's slots full is dropped, never queued, so only the draws are about 100.
	st := e.ScoringStats("churn")["green"]
	sent, dropped := st.Mirrored-stats0.Mirrored, st.MirrorDropped-stats0.MirrorDropped
	if drawn := sent + dropped; drawn < 68 || drawn > 132 || sent == 0 || st.MirrorFailed != stats0.MirrorFailed {
		t.Fatalf("mirror copies: %d sent, %d dropped, %d failed of 200 requests; want about 100 drawn, some sent, none failed",
			sent, dropped, st.MirrorFailed-stats0.MirrorFailed)
	}
	t.Logf("mirror: %d copies sent, %d dropped (green full) of 200 requests", sent, dropped)
	if st.Requests != stats0.Requests {
		t.Fatal("mirror copies counted as green's own requests")
	}
	// Every copy finishes and gives its slot back.
	for deadline := time.Now().Add(30 * time.Second); e.ScoringStats("churn")["green"].InFlight != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("green still holds %d mirror copies", e.ScoringStats("churn")["green"].InFlight)
		}
	}

	// aml_token mode: keys stop working, a token from the API works.
	upd := api.EndpointUpdate{AuthMode: api.AuthModeAMLToken, Deployments: map[string]api.DeploymentSpec{"blue": deployment(t, "blue"), "green": deployment(t, "green")}, Traffic: map[string]int64{"green": 100}}
	if _, err := c.UpdateEndpoint(ctx, "team", "churn", upd); err != nil {
		t.Fatal(err)
	}
	tok, err := c.GetEndpointToken(ctx, "team", "churn")
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, ep.ScoringURI, after.PrimaryKey, ""); code != http.StatusUnauthorized {
		t.Fatalf("key on an aml_token endpoint: %d; want 401", code)
	}
	if code, body := post(t, ep.ScoringURI, tok.AccessToken, ""); code != 200 || body["deployment"] != "green" {
		t.Fatalf("token, traffic all green: %d %v", code, body)
	}

	if err := c.DeleteEndpoint(ctx, "team", "churn"); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, ep.ScoringURI, tok.AccessToken, ""); code != http.StatusNotFound {
		t.Fatalf("after delete: %d; want 404", code)
	}
	if ws, err := c.ListEndpoints(ctx, "team"); err != nil || len(ws) != 0 {
		t.Fatalf("endpoints after delete: %v, %v", ws, err)
	}
}

// TestEndpointAPIErrors checks that the API carries validation errors with their attribute
// path, as the provider turns them into attribute diagnostics.
func TestEndpointAPIErrors(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team"}); err != nil {
		t.Fatal(err)
	}
	spec := api.EndpointSpec{
		Name:        "churn",
		Deployments: map[string]api.DeploymentSpec{"blue": deployment(t, "blue"), "green": deployment(t, "green")},
		Traffic:     map[string]int64{"blue": 80, "green": 10},
	}
	_, err := c.CreateEndpoint(ctx, "team", spec)
	if !api.IsInvalid(err) || api.FieldOf(err) != "traffic" || !strings.Contains(err.Error(), "sum to 100") {
		t.Fatalf("traffic summing to 90: %v", err)
	}
	spec.Traffic = map[string]int64{"blue": 100}
	spec.MirrorTraffic = map[string]int64{"green": 60}
	if _, err := c.CreateEndpoint(ctx, "team", spec); api.FieldOf(err) != "mirror_traffic.green" {
		t.Fatalf("mirror 60: %v", err)
	}
	spec.MirrorTraffic = nil
	ep, err := c.CreateEndpoint(ctx, "team", spec)
	if err != nil {
		t.Fatal(err)
	}
	// Defaults are filled in, and the size is stored in the catalog's spelling.
	blue := ep.Deployments["blue"]
	if blue.RequestSettings == nil || blue.RequestSettings.RequestTimeoutMS != 5000 || blue.RequestSettings.MaxConcurrentRequestsPerInstance != 1 || blue.ReadinessProbe.Path != "/health" {
		t.Fatalf("stored deployment %+v", blue.DeploymentSpec)
	}
	if _, err := c.GetEndpoint(ctx, "team", "nope"); !api.IsNotFound(err) {
		t.Fatalf("unknown endpoint: %v", err)
	}
	if _, err := c.GetEndpointToken(ctx, "team", "churn"); !api.IsInvalid(err) || api.FieldOf(err) != "auth_mode" {
		t.Fatalf("token of a key endpoint: %v", err)
	}
	if _, err := c.RegenerateEndpointKeys(ctx, "team", "churn", "both"); api.FieldOf(err) != "key_type" {
		t.Fatalf("regenerating key type both: %v", err)
	}
	if err := c.DeleteWorkspace(ctx, "team", false); !api.IsConflict(err) || !strings.Contains(err.Error(), "onlineEndpoints/churn") {
		t.Fatalf("deleting a workspace holding an endpoint: %v", err)
	}
}
