package endpointapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointstest"
)

// The API's calls against the endpoints controller on a fake driver
// (package endpointstest), as the engine builds them.

func TestEndpointKeysAndTokens(t *testing.T) {
	env := endpointstest.New(t, endpointstest.Options{})
	env.Workspace("wsp", nil)
	c := env.API
	ctx := context.Background()
	spec := api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve")}}
	if _, err := c.CreateEndpoint(ctx, "wsp", spec, ""); err != nil {
		t.Fatal(err)
	}
	keys, err := c.GetEndpointKeys(ctx, "wsp", "scorer")
	if err != nil || len(keys.PrimaryKey) != 43 || keys.PrimaryKey == keys.SecondaryKey {
		t.Fatalf("keys %+v, %v", keys, err)
	}
	after, err := c.RegenerateEndpointKeys(ctx, "wsp", "scorer", "secondary")
	if err != nil || after.PrimaryKey != keys.PrimaryKey || after.SecondaryKey == keys.SecondaryKey {
		t.Fatalf("regenerate secondary: %+v, %v", after, err)
	}
	if _, err := c.RegenerateEndpointKeys(ctx, "wsp", "scorer", "tertiary"); api.FieldOf(err) != "key_type" {
		t.Fatalf("bad key type: %v", err)
	}
	if _, err := c.GetEndpointToken(ctx, "wsp", "scorer"); api.FieldOf(err) != "auth_mode" {
		t.Fatalf("token for a key endpoint: %v", err)
	}
	if _, err := c.CreateEndpoint(ctx, "wsp", spec, ""); !api.IsConflict(err) {
		t.Fatalf("same name twice: %v", err)
	}
	env.Workspace("other", nil)
	if _, err := c.CreateEndpoint(ctx, "other", spec, ""); !api.IsConflict(err) || !strings.Contains(err.Error(), `taken by workspace "wsp"`) {
		t.Fatalf("same name in another workspace: %v", err)
	}

	if _, err := c.UpdateEndpoint(ctx, "wsp", "scorer", api.EndpointUpdate{AuthMode: "aml_token", Deployments: spec.Deployments}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.GetEndpointToken(ctx, "wsp", "scorer")
	if err != nil {
		t.Fatal(err)
	}
	if !tok.ExpiresOn.Equal(env.Clock.Now().Add(time.Hour).Truncate(time.Second)) {
		t.Fatalf("expires %s", tok.ExpiresOn)
	}
	// The token is the scoring front's, for this endpoint (package scoring tests the rest).
	if !env.Scoring.VerifyToken("wsp/scorer", tok.AccessToken) || env.Scoring.VerifyToken("other/scorer", tok.AccessToken) {
		t.Fatal("the endpoint's token does not open it alone")
	}
}
