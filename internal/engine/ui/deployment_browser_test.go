package ui_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
)

// TestStatusPagePlotsADeploymentsRequestRate serves a real model on a local node, sends it
// scoring requests between two samples of the engine's history, and checks that the
// history's request rate counts exactly those requests and that the page plots the
// deployment's instances and rate.
func TestStatusPagePlotsADeploymentsRequestRate(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const token = "ui-endpoint-token"
	e := enginetest.Start(t, enginetest.Options{Token: token, AgentArgv: []string{exe, "node-agent"}})
	p := openPage(t, e, token, server.Options{})
	c, ctx := p.c, context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	probe := &api.Probe{Path: "/health", InitialDelay: "PT0S", Period: "PT1S", Timeout: "PT1S", SuccessThreshold: 1, FailureThreshold: 30}
	ep, err := c.CreateEndpoint(ctx, "lab", api.EndpointSpec{
		Name: "churn",
		Deployments: map[string]api.DeploymentSpec{"blue": {
			InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: []string{exe, "scorer"},
			EnvironmentVariables: map[string]string{"SCORER_NAME": "blue"}, LivenessProbe: probe, ReadinessProbe: probe,
		}},
		Traffic: map[string]int64{"blue": 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ep.ProvisioningState != api.ProvisioningSucceeded; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("endpoint never ready: %+v", ep)
		}
		if ep, err = c.GetEndpoint(ctx, "lab", "churn"); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := c.GetEndpointKeys(ctx, "lab", "churn")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SampleHistory(ctx); err != nil {
		t.Fatal(err)
	}
	const requests = 25
	for range requests {
		req, _ := http.NewRequest("POST", ep.ScoringURI, strings.NewReader(`{"x": 1}`))
		req.Header.Set("Authorization", "Bearer "+keys.PrimaryKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("scoring request: %s", res.Status)
		}
	}
	if err := e.SampleHistory(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := c.History(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Deployments) != 1 || h.Deployments[0].Endpoint != "churn" || h.Deployments[0].Deployment != "blue" {
		t.Fatalf("history's deployments %+v; want churn/blue", h.Deployments)
	}
	pts := h.Deployments[0].Points
	if len(pts) < 2 {
		t.Fatalf("churn/blue has %d points; want the two samples", len(pts))
	}
	a, b := pts[len(pts)-2], pts[len(pts)-1]
	if got := b.RequestRate * b.Time.Sub(a.Time).Seconds(); math.Abs(got-requests) > 1e-6 || b.Instances != 1 {
		t.Fatalf("between the last two samples the rate %v over %v counts %v requests on %d instances; want %d on 1",
			b.RequestRate, b.Time.Sub(a.Time), got, b.Instances, requests)
	}

	p.login()
	plot := `[data-endpoint="lab/churn"] .plot[data-plot="deployment:lab/churn/blue"]`
	p.waitFor("the deployment's plot with its instances and request rate", fmt.Sprintf(
		`(() => { const pl = document.querySelector('%s'); return !!pl && +pl.dataset.points >= 2 &&
		   pl.querySelector('.series[data-series="instances"]').dataset.last === "1" &&
		   +pl.querySelector('.series[data-series="req/s"]').dataset.last > 0 })()`, plot))
	if got := p.attr(plot+` .series[data-series="req/s"]`, "data-last"); got != fmt.Sprint(b.RequestRate) {
		t.Errorf("the page plots a last rate of %s; the history says %v", got, b.RequestRate)
	}
	screenshot(t, p.ctx, filepath.Join(artifactDir(t), "status-page-deployment.png"))
}
