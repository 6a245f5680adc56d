//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// scoringClient sends requests straight to the scoring router, with its own connections.
var scoringClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}

type scored struct {
	status     int
	deployment string
	pid        int
	image      string // the version of the container image the scorer runs in, if any
	body       string // the router's error body, for a status other than 200
}

// waitForFile waits until a scorer's marker file exists.
func waitForFile(t *testing.T, path, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s (%s)", what, filepath.Base(path))
		}
	}
}

func score(t *testing.T, uri, credential, deployment, query, requestID string) scored {
	t.Helper()
	req, _ := http.NewRequest("POST", uri+query, strings.NewReader(`{"rows": [[1, 2]]}`))
	req.Header.Set("Content-Type", "application/json")
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	if deployment != "" {
		req.Header.Set("azureml-model-deployment", deployment)
	}
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	res, err := scoringClient.Do(req)
	if err != nil {
		t.Errorf("scoring request: %v", err)
		return scored{}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := scored{status: res.StatusCode}
	if res.StatusCode == 200 {
		var body struct {
			Deployment string `json:"deployment"`
			PID        int    `json:"pid"`
			Image      string `json:"image"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("scoring response %q: %v", raw, err)
		}
		out.deployment, out.pid, out.image = body.Deployment, body.PID, body.Image
	} else {
		out.body = string(raw)
	}
	return out
}

// load sends n requests from workers goroutines and returns every result.
func load(t *testing.T, n, workers int, uri, key string, during func(done int64)) []scored {
	var (
		next, done atomic.Int64
		mu         sync.Mutex
		results    []scored
		wg         sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				r := score(t, uri, key, "", "", "")
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				if d := done.Add(1); during != nil {
					during(d)
				}
			}
		}()
	}
	wg.Wait()
	return results
}

func (u *user) waitEndpoint(ws, name, state string) *api.Endpoint {
	u.t.Helper()
	var ep *api.Endpoint
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if ep, err = u.client().GetEndpoint(context.Background(), ws, name); err != nil {
			u.t.Fatal(err)
		}
		if ep.ProvisioningState == state {
			return ep
		}
	}
	u.t.Fatalf("endpoint %s never %s: %+v", name, state, ep)
	return nil
}

// TestE2E_EndpointRouting drives a real engine (started by terraform through the
// provider) with real scorer processes: the traffic split, an instance killed under load,
// 401, 429, the request timeout, the CLI, and an engine restart that keeps scoring_uri and
// adopts the running instances.
func TestE2E_EndpointRouting(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.writeConfig(requiredProviders + "provider \"mlcompute\" {}\nresource \"mlcompute_workspace\" \"ws\" {\n  name = \"e2e-serving\"\n}\n")
	u.mustTerraform("apply", "-auto-approve")
	ctx := context.Background()
	markers := t.TempDir()
	probe := &api.Probe{Path: "/health", InitialDelay: "PT0S", Period: "PT1S", Timeout: "PT1S", SuccessThreshold: 1, FailureThreshold: 3}
	dep := func(name string, count, maxConcurrent, timeoutMS int64) api.DeploymentSpec {
		return api.DeploymentSpec{
			InstanceType: "Standard_DS2_v2", InstanceCount: count, Command: []string{filepath.Join(binDir, "scorer")},
			EnvironmentVariables: map[string]string{"SCORER_NAME": name, "SCORER_MARKER_DIR": markers},
			RequestSettings:      &api.RequestSettings{RequestTimeoutMS: timeoutMS, MaxConcurrentRequestsPerInstance: maxConcurrent},
			LivenessProbe:        probe, ReadinessProbe: probe,
		}
	}
	ep, err := u.client().CreateEndpoint(ctx, "e2e-serving", api.EndpointSpec{
		Name: "split",
		Deployments: map[string]api.DeploymentSpec{
			"blue": dep("blue", 2, 16, 5000), "green": dep("green", 1, 16, 5000), "slow": dep("slow", 1, 1, 1000),
		},
		Traffic: map[string]int64{"blue": 80, "green": 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	u.waitEndpoint("e2e-serving", "split", api.ProvisioningSucceeded)
	keys, err := u.client().GetEndpointKeys(ctx, "e2e-serving", "split")
	if err != nil {
		t.Fatal(err)
	}
	uri := ep.ScoringURI

	// 1,000 requests through the 80/20 split: blue's share within 4.5 sigma of 800.
	results := load(t, 1000, 8, uri, keys.PrimaryKey, nil)
	counts := map[string]int{}
	for _, r := range results {
		if r.status != 200 {
			t.Fatalf("a request of the split got %d: %s", r.status, r.body)
		}
		counts[r.deployment]++
	}
	tolerance := 4.5 * math.Sqrt(1000*0.8*0.2)
	if counts["blue"]+counts["green"] != 1000 || math.Abs(float64(counts["blue"])-800) > tolerance {
		t.Fatalf("split %v; want blue within %.0f of 800 and nothing elsewhere", counts, tolerance)
	}
	t.Logf("80/20 split over 1000 requests: %v (tolerance %.0f)", counts, tolerance)

	// A rollout under load drops nothing: blue's new generation starts, becomes ready and
	// takes over while the old instances drain.
	upd := api.EndpointUpdate{
		Deployments: map[string]api.DeploymentSpec{
			"blue": dep("blue", 2, 16, 5000), "green": dep("green", 1, 16, 5000), "slow": dep("slow", 1, 1, 1000),
		},
		Traffic: map[string]int64{"blue": 80, "green": 20},
	}
	upd.Deployments["blue"].EnvironmentVariables["MODEL_VERSION"] = "2"
	oldBlue := map[int]bool{}
	for _, r := range results {
		if r.deployment == "blue" {
			oldBlue[r.pid] = true
		}
	}
	var rolled atomic.Bool
	var rollout sync.WaitGroup
	rollout.Add(1)
	go func() {
		defer rollout.Done()
		if _, err := u.client().UpdateEndpoint(ctx, "e2e-serving", "split", upd); err != nil {
			t.Errorf("updating blue: %v", err)
			return
		}
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			ep, err := u.client().GetEndpoint(ctx, "e2e-serving", "split")
			if err == nil && ep.Deployments["blue"].Generation == 2 && len(ep.Deployments["blue"].Instances) == 2 && ep.ProvisioningState == api.ProvisioningSucceeded {
				rolled.Store(true)
				return
			}
		}
		t.Error("the rollout never finished")
	}()
	var during []scored
	for !rolled.Load() && !t.Failed() {
		during = append(during, load(t, 100, 4, uri, keys.PrimaryKey, nil)...)
	}
	rollout.Wait()
	for _, r := range during {
		if r.status != 200 {
			t.Fatalf("a request during the rollout got %d: %s", r.status, r.body)
		}
	}
	results = load(t, 200, 8, uri, keys.PrimaryKey, nil)
	for _, r := range results {
		if r.deployment == "blue" && oldBlue[r.pid] {
			t.Fatalf("an old blue process (pid %d) still serves after the rollout", r.pid)
		}
	}
	t.Logf("rollout under load: %d requests, all 200", len(during))

	// Kill one blue instance's process mid-load: the router retries requests that cannot
	// reach it, so at most the requests that were on it fail: no more than the 8 the
	// workers can have in flight at all.
	var victim int
	for _, r := range results {
		if r.deployment == "blue" {
			victim = r.pid
			break
		}
	}
	var killed atomic.Bool
	results = load(t, 600, 8, uri, keys.PrimaryKey, func(done int64) {
		if done >= 150 && killed.CompareAndSwap(false, true) {
			if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
				t.Errorf("killing instance process %d: %v", victim, err)
			}
		}
	})
	failed := 0
	for _, r := range results {
		if r.status >= 500 {
			failed++
		}
	}
	t.Logf("instance killed under load: %d of 600 requests failed", failed)
	if failed > 8 {
		t.Fatalf("%d requests failed after an instance was killed; at most the 8 in flight may", failed)
	}
	// The engine restarts it.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ep := u.waitEndpoint("e2e-serving", "split", api.ProvisioningSucceeded)
		restarted := false
		for _, in := range ep.Deployments["blue"].Instances {
			restarted = restarted || (in.Restarts >= 1 && in.State == api.EndpointInstanceReady)
		}
		if restarted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed instance never came back: %+v", ep.Deployments["blue"])
		}
	}

	// A missing or wrong key is 401 and reaches no deployment.
	for _, cred := range []string{"", "not-the-key"} {
		if r := score(t, uri, cred, "", "", ""); r.status != 401 {
			t.Fatalf("credential %q: %d; want 401", cred, r.status)
		}
	}

	// 429: "slow" holds one request per instance; a second one while the first runs is
	// refused. The second goes out once the scorer says the first entered (and so holds
	// the slot). Only a machine too slow to send it within the first one's 800 ms lets
	// both through, and that repeats the attempt.
	got429 := false
	for attempt := 0; attempt < 5 && !got429; attempt++ {
		id := fmt.Sprintf("e2e-slot-%d", attempt)
		first := make(chan scored, 1)
		go func() { first <- score(t, uri, keys.PrimaryKey, "slow", "?sleep_ms=800", id) }()
		waitForFile(t, filepath.Join(markers, "entered-"+id), "the first request to reach the scorer")
		second := score(t, uri, keys.PrimaryKey, "slow", "", "")
		r := <-first
		switch {
		case r.status == 200 && second.status == 429:
			got429 = true
		case r.status != 200 || second.status != 200:
			t.Fatalf("two requests on a one-slot deployment: %d and %d", r.status, second.status)
		}
	}
	if !got429 {
		t.Fatal("a request arriving while the only slot was taken was never refused with 429")
	}

	// Timeout: past request_timeout_ms (1 s) the answer is 504 and the backend's request
	// context is cancelled, which the scorer records.
	if r := score(t, uri, keys.PrimaryKey, "slow", "?sleep_ms=5000", "e2e-timeout-1"); r.status != 504 {
		t.Fatalf("request past the timeout: %d; want 504", r.status)
	}
	waitForFile(t, filepath.Join(markers, "cancelled-e2e-timeout-1"), "the backend to see its request cancelled")

	// The CLI scores through the same router.
	out, code := u.cli("endpoint", "invoke", "--workspace", "e2e-serving", "split", "--deployment", "green", "--data", `{"rows": []}`)
	if code != 0 || !strings.Contains(out, `"deployment":"green"`) {
		t.Fatalf("endpoint invoke: exit %d: %s", code, out)
	}

	// An engine restart keeps scoring_uri and adopts the instances: same processes serve.
	before := map[int]bool{}
	for _, r := range load(t, 50, 4, uri, keys.PrimaryKey, nil) {
		before[r.pid] = true
	}
	pid := u.enginePID()
	if out, code := u.cli("shutdown"); code != 0 {
		t.Fatalf("shutdown: exit %d: %s", code, out)
	}
	if !u.waitGone(pid, 30*time.Second) {
		t.Fatal("engine did not stop")
	}
	out, code = u.cli("endpoint", "show", "--workspace", "e2e-serving", "split", "-o", "json")
	if code != 0 {
		t.Fatalf("endpoint show after restart: exit %d: %s", code, out)
	}
	var again api.Endpoint
	decodeJSON(t, out, &again)
	if again.ScoringURI != uri {
		t.Fatalf("scoring_uri after restart %q; want %q", again.ScoringURI, uri)
	}
	u.waitEndpoint("e2e-serving", "split", api.ProvisioningSucceeded)
	for _, r := range load(t, 50, 4, uri, keys.PrimaryKey, nil) {
		if r.status != 200 || !before[r.pid] {
			t.Fatalf("after restart: status %d from pid %d; want 200 from an adopted process %v", r.status, r.pid, before)
		}
	}

	// terraform destroy of the workspace takes the endpoint with it only with
	// force_destroy; here the endpoint is deleted through the API first.
	if err := u.client().DeleteEndpoint(ctx, "e2e-serving", "split"); err != nil {
		t.Fatal(err)
	}
	if r := score(t, uri, keys.PrimaryKey, "", "", ""); r.status != 404 {
		t.Fatalf("after delete: %d; want 404", r.status)
	}
	for p := range before {
		if processAlive(p) {
			t.Fatalf("scorer process %d outlived its endpoint", p)
		}
	}
	u.mustTerraform("destroy", "-auto-approve")

}
