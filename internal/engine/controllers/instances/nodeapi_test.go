package instances_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/instances"
)

func TestActivityTokensAreOnePerInstanceIncarnation(t *testing.T) {
	key := []byte("k1")
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tok := instances.ActivityToken(key, "lab", "dev", at)
	if !strings.HasPrefix(tok, instances.ActivityTokenPrefix) {
		t.Fatalf("token %q lacks its prefix", tok)
	}
	for name, other := range map[string]string{
		"another instance":           instances.ActivityToken(key, "lab", "dev2", at),
		"another workspace":          instances.ActivityToken(key, "lab2", "dev", at),
		"the same name created anew": instances.ActivityToken(key, "lab", "dev", at.Add(time.Nanosecond)),
		"another engine key":         instances.ActivityToken([]byte("k2"), "lab", "dev", at),
	} {
		if other == tok {
			t.Errorf("%s gets the same token", name)
		}
	}
	if again := instances.ActivityToken(key, "lab", "dev", at); again != tok {
		t.Errorf("the same instance got two tokens: %s, %s", tok, again)
	}
}

// TestInstanceProcessesGetTheEngineAndAnActivityToken: a setup script (and so a notebook
// server it starts) finds the engine's endpoint and a token in its environment; the
// token is valid for its instance alone.
func TestInstanceProcessesGetTheEngineAndAnActivityToken(t *testing.T) {
	env := computestest.New(t, computestest.Options{})
	nodeAPI := instances.NodeAPI{Endpoint: "unix:///engine.sock", Key: []byte("engine key")}
	c := instances.New(instances.Config{Core: env.Core, MinIdleShutdown: time.Minute, DataDir: env.DataDir, NodeAPI: nodeAPI})
	env.Core.RegisterPass(api.TypeComputeInstance, c.Pass)
	env.Workspace("lab", nil)
	create(t, env, c, &api.InstanceSettings{SetupScripts: &api.SetupScripts{StartupScript: &api.SetupScript{Inline: "jupyter lab &"}}})

	task, ok := env.Driver.Task(liveNode(t, env).ID, "setup-1-startup")
	if !ok {
		t.Fatal("the startup script did not start")
	}
	got := task.Spec.Env
	if got["MLCOMPUTE_ENDPOINT"] != "unix:///engine.sock" || got["MLCOMPUTE_WORKSPACE"] != "lab" || got["MLCOMPUTE_COMPUTE"] != "dev" {
		t.Fatalf("setup script env = %v; want the engine's endpoint, the workspace and the compute", got)
	}
	if _, ok := got["MLCOMPUTE_CA_CERT"]; ok {
		t.Errorf("a unix endpoint got a CA: %v", got)
	}
	tok := got["MLCOMPUTE_TOKEN"]
	if !strings.HasPrefix(tok, instances.ActivityTokenPrefix) {
		t.Fatalf("MLCOMPUTE_TOKEN = %q; want an activity token", tok)
	}
	if !c.ActivityTokenValid("lab", "dev", tok) {
		t.Error("the instance's own token is refused")
	}
	for _, tc := range []struct{ ws, name, tok string }{
		{"lab", "other", tok},
		{"lab2", "dev", tok},
		{"lab", "dev", tok + "0"},
		{"lab", "dev", ""},
	} {
		if c.ActivityTokenValid(tc.ws, tc.name, tc.tok) {
			t.Errorf("token %q accepted for %s/%s", tc.tok, tc.ws, tc.name)
		}
	}
}

// TestNoEndpointNoToken: where the node cannot reach the engine, its processes get
// neither, and no token is accepted.
func TestNoEndpointNoToken(t *testing.T) {
	env, c := setup(t)
	create(t, env, c, &api.InstanceSettings{SetupScripts: &api.SetupScripts{StartupScript: &api.SetupScript{Inline: "true"}}})
	task, _ := env.Driver.Task(liveNode(t, env).ID, "setup-1-startup")
	if _, ok := task.Spec.Env["MLCOMPUTE_TOKEN"]; ok {
		t.Errorf("env = %v; want no token without a node API", task.Spec.Env)
	}
	if _, ok := task.Spec.Env["MLCOMPUTE_ENDPOINT"]; ok {
		t.Errorf("env = %v; want no endpoint without a node API", task.Spec.Env)
	}
	if c.ActivityTokenValid("lab", "dev", instances.ActivityToken(nil, "lab", "dev", env.Compute(key).CreatedOn)) {
		t.Error("an engine without an activity key accepted a token")
	}
}
