package enginetest_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
)

// envServer is a model server that needs its environment: it imports mlctest (installed
// only in the environment) and answers /score with the python PATH finds first and the
// package's version, so the test sees what the served process sees.
var envServer = enginetest.PythonScorer("mlctest", `{"python": shutil.which("python"), "hello": mlctest.HELLO}`)

// TestEndpointRunsInItsEnvironment serves a deployment whose command imports a package
// that only its environment has: the instance builds the environment on its node, the
// served process finds the environment's python first on PATH, and an update of the
// environment (a new content hash) rolls the deployment out onto the new build.
func TestEndpointRunsInItsEnvironment(t *testing.T) {
	t.Parallel()
	e, c := localEngine(t)
	ctx := context.Background()
	wheels := wheelDir(t, "0.1", "0.2")
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "serve"}); err != nil {
		t.Fatal(err)
	}
	env, err := c.CreateEnvironment(ctx, "serve", api.EnvironmentSpec{Name: "scoring", Python: &api.PythonEnvironment{
		Requirements: []string{"mlctest==0.1"}, FindLinks: []string{wheels}}})
	if err != nil {
		t.Fatal(err)
	}
	// The environment's build counts against the probes' budget (environment_id's docs):
	// 180 one-second probes leave room for a build on a loaded machine.
	probe := fastProbe()
	probe.FailureThreshold = 180
	d := api.DeploymentSpec{
		InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: []string{"python", "-c", envServer},
		EnvironmentID: env.ID, LivenessProbe: probe, ReadinessProbe: probe,
	}
	ep, err := c.CreateEndpoint(ctx, "serve", api.EndpointSpec{Name: "envscore", Deployments: map[string]api.DeploymentSpec{"blue": d}, Traffic: map[string]int64{"blue": 100}})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Deployments["blue"].EnvironmentID != env.ID {
		t.Fatalf("environment_id read back as %q; want %q", ep.Deployments["blue"].EnvironmentID, env.ID)
	}
	waitState(t, c, "serve", "envscore", api.ProvisioningSucceeded)
	keys, err := c.GetEndpointKeys(ctx, "serve", "envscore")
	if err != nil {
		t.Fatal(err)
	}
	wantPython := func(hash string) string {
		return filepath.Join(e.DataDir, "envs", environment.CacheName(hash), "bin", "python")
	}
	if code, body := post(t, ep.ScoringURI, keys.PrimaryKey, ""); code != 200 || body["python"] != wantPython(env.ContentHash) || body["hello"] != "mlctest 0.1" {
		t.Fatalf("score: %d %v; want the environment's python %s first on PATH and mlctest 0.1", code, body, wantPython(env.ContentHash))
	}

	// The environment changes: the deployment rolls out onto the new build.
	env2, err := c.UpdateEnvironment(ctx, "serve", "scoring", api.EnvironmentUpdate{Python: &api.PythonEnvironment{
		Requirements: []string{"mlctest==0.2"}, FindLinks: []string{wheels}}})
	if err != nil {
		t.Fatal(err)
	}
	if env2.ContentHash == env.ContentHash {
		t.Fatal("the update did not change the content hash")
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		code, body := post(t, ep.ScoringURI, keys.PrimaryKey, "")
		if code == 200 && body["hello"] == "mlctest 0.2" {
			if body["python"] != wantPython(env2.ContentHash) {
				t.Fatalf("after the rollout python is %v; want %s", body["python"], wantPython(env2.ContentHash))
			}
			break
		}
		if code != 200 || body["hello"] != "mlctest 0.1" {
			t.Fatalf("during the rollout: %d %v; want the old deployment answering until the new one is ready", code, body)
		}
		if time.Now().After(deadline) {
			t.Fatal("the deployment never rolled out onto the new environment")
		}
	}
	got, err := c.GetEndpoint(ctx, "serve", "envscore")
	if err != nil {
		t.Fatal(err)
	}
	if got.Deployments["blue"].Generation != 2 {
		t.Fatalf("generation %d after the environment changed; want 2", got.Deployments["blue"].Generation)
	}

	// An environment of another workspace, or none at all, is refused naming the attribute.
	for id, want := range map[string]string{
		"/workspaces/other/environments/scoring": `is in workspace "other"`,
		"/workspaces/serve/environments/nope":    `environment "nope" does not exist`,
		"scoring":                                "is not an environment ID",
	} {
		bad := d
		bad.EnvironmentID = id
		_, err := c.CreateEndpoint(ctx, "serve", api.EndpointSpec{Name: "refused", Deployments: map[string]api.DeploymentSpec{"blue": bad}})
		var apiErr *api.Error
		if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid || apiErr.Field != "deployments.blue.environment_id" || !strings.Contains(apiErr.Message, want) {
			t.Fatalf("environment_id %q: %v; want invalid naming deployments.blue.environment_id and %q", id, err, want)
		}
	}
}
