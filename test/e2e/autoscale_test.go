//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// decisionLog collects a deployment's scale decisions by polling the engine (the status
// keeps only the latest ones).
type decisionLog struct {
	mu   sync.Mutex
	seen map[string]api.ScaleDecision
	stop chan struct{}
	done chan struct{}
}

func watchDecisions(u *user, ws, ep, dep string) *decisionLog {
	l := &decisionLog{seen: map[string]api.ScaleDecision{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			if got, err := u.client().GetEndpoint(context.Background(), ws, ep); err == nil {
				l.mu.Lock()
				for _, d := range got.Deployments[dep].ScaleDecisions {
					l.seen[d.Time.Format(time.RFC3339Nano)+fmt.Sprint(d.From, d.To)] = d
				}
				l.mu.Unlock()
			}
			select {
			case <-l.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return l
}

// between returns the decisions in [from, to), and the ups and downs among them.
func (l *decisionLog) between(from, to time.Time) (all []api.ScaleDecision, ups, downs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.seen {
		if !d.Time.Before(from) && d.Time.Before(to) {
			all = append(all, d)
			if d.To > d.From {
				ups++
			} else {
				downs++
			}
		}
	}
	return all, ups, downs
}

func (l *decisionLog) close() { close(l.stop); <-l.done }

// clients runs n closed-loop clients, each sending requests of sleepMS to the endpoint until
// stop is closed; it counts the answers by status.
type clientPool struct {
	wg       sync.WaitGroup
	ok, fail atomic.Int64
	mu       sync.Mutex
	failures []string
}

func (p *clientPool) start(n int, uri, key, pin string, sleepMS int, stop <-chan struct{}) {
	for range n {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", uri+"?sleep_ms="+strconv.Itoa(sleepMS), strings.NewReader("{}"))
				req.Header.Set("Authorization", "Bearer "+key)
				if pin != "" {
					req.Header.Set("azureml-model-deployment", pin)
				}
				res, err := scoringClient.Do(req)
				if err != nil {
					p.record(fmt.Sprintf("transport: %v", err))
					continue
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode == 200 {
					p.ok.Add(1)
				} else {
					p.record(fmt.Sprintf("%d %s", res.StatusCode, strings.TrimSpace(string(body))))
				}
			}
		}()
	}
}

func (p *clientPool) record(s string) {
	p.fail.Add(1)
	p.mu.Lock()
	if len(p.failures) < 5 {
		p.failures = append(p.failures, s)
	}
	p.mu.Unlock()
}

// TestE2E_EndpointAutoscaling drives an autoscaled deployment of real scorer processes
// through the real engine: the first request from zero gets 200, a load step reaches max
// within two polling intervals, without load it goes back to zero, scale-in under load
// fails no request, a square wave moves once up and once down per period, a start failure
// from zero answers 503 at once, and the hold queue's bound answers 429.
func TestE2E_EndpointAutoscaling(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.writeConfig(requiredProviders + "provider \"mlcompute\" {}\nresource \"mlcompute_workspace\" \"ws\" {\n  name = \"e2e-auto\"\n}\n")
	u.mustTerraform("apply", "-auto-approve")
	ctx := context.Background()
	probe := &api.Probe{Path: "/health", InitialDelay: "PT0S", Period: "PT1S", Timeout: "PT1S", SuccessThreshold: 1, FailureThreshold: 3}
	auto := func(name string, min, max int64, command ...string) api.DeploymentSpec {
		if len(command) == 0 {
			command = []string{filepath.Join(binDir, "scorer")}
		}
		return api.DeploymentSpec{
			InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: command,
			EnvironmentVariables: map[string]string{"SCORER_NAME": name},
			RequestSettings:      &api.RequestSettings{RequestTimeoutMS: 10000, MaxConcurrentRequestsPerInstance: 1},
			LivenessProbe:        probe, ReadinessProbe: probe,
			ScaleSettings: &api.EndpointScaleSettings{Type: api.ScaleTypeTargetUtilization, MinInstances: min, MaxInstances: max,
				TargetUtilizationPercentage: 100, PollingInterval: "PT1S", ScaleDownDelay: "PT2S"},
		}
	}
	tight := auto("tight", 1, 1)
	tight.RequestSettings.MaxQueueWaitMS = 20000
	ep, err := u.client().CreateEndpoint(ctx, "e2e-auto", api.EndpointSpec{
		Name: "auto",
		Deployments: map[string]api.DeploymentSpec{
			"blue": auto("blue", 0, 4), "broken": auto("broken", 0, 1, "/bin/false"), "tight": tight,
		},
		Traffic: map[string]int64{"blue": 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	u.waitEndpoint("e2e-auto", "auto", api.ProvisioningSucceeded)
	keys, err := u.client().GetEndpointKeys(ctx, "e2e-auto", "auto")
	if err != nil {
		t.Fatal(err)
	}
	uri, key := ep.ScoringURI, keys.PrimaryKey
	got, _ := u.client().GetEndpoint(ctx, "e2e-auto", "auto")
	if d := got.Deployments["blue"]; d.DesiredInstances != 0 || len(d.Instances) != 0 {
		t.Fatalf("blue at min_instances 0 has desired %d and %d instances before any request", d.DesiredInstances, len(d.Instances))
	}
	log := watchDecisions(u, "e2e-auto", "auto", "blue")
	defer log.close()

	// From zero: the first request is held until an instance is ready, and gets 200.
	sent := time.Now()
	req, _ := http.NewRequest("POST", uri, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := scoringClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var firstBody struct {
		Started   int64 `json:"started_unix_ns"`
		Listening int64 `json:"listening_unix_ns"`
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	latency := time.Since(sent)
	if res.StatusCode != 200 || json.Unmarshal(raw, &firstBody) != nil {
		t.Fatalf("first request from zero: %d %s; want 200", res.StatusCode, raw)
	}
	own := time.Duration(firstBody.Listening - firstBody.Started)
	t.Logf("MEASURE first request from zero: %s; the scorer's own start (process start to listening) %s, its process began %s after the request; engine overhead %s",
		latency.Round(time.Millisecond), own.Round(100*time.Microsecond),
		time.Unix(0, firstBody.Started).Sub(sent).Round(100*time.Microsecond), (latency - own).Round(time.Millisecond))

	// A load step to 4 clients (the max): max within two polling intervals of the need.
	stop := make(chan struct{})
	var pool clientPool
	stepAt := time.Now()
	pool.start(4, uri, key, "", 300, stop)
	var reachedMax time.Duration
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got, err := u.client().GetEndpoint(ctx, "e2e-auto", "auto")
		if err == nil && got.Deployments["blue"].DesiredInstances == 4 {
			reachedMax = time.Since(stepAt)
			break
		}
	}
	if reachedMax == 0 {
		t.Fatal("a load of 4 clients never brought blue to its max of 4")
	}
	// How soon is the rule's (its table tests hold it on a fake clock) and the machine's:
	// measured, not asserted. What the engine did must be the rule's: ups for the load.
	t.Logf("MEASURE decision latency after a load step 1 -> 4 clients: %s (polling_interval 1s)", reachedMax.Round(time.Millisecond))
	stepped, _, _ := log.between(stepAt, time.Now().Add(time.Second))
	for _, d := range stepped {
		if d.To <= d.From || d.Reason != "load above target utilization" || d.Load == 0 {
			t.Errorf("after the load step: decision %+v; want only ups for the load above target utilization", d)
		}
	}

	// Square wave between 1 and 4 clients, 6 s each: one up and one down per period, and no
	// failed request while instances drain.
	close(stop)
	pool.wg.Wait()
	base := make(chan struct{})
	pool.start(1, uri, key, "", 300, base)
	waveStart := time.Now()
	const periods = 4
	for range periods {
		stop = make(chan struct{})
		pool.start(3, uri, key, "", 300, stop)
		time.Sleep(6 * time.Second) // the load's own shape, not a synchronisation
		close(stop)
		time.Sleep(6 * time.Second)
	}
	waveEnd := time.Now()
	all, ups, downs := log.between(waveStart.Add(3*time.Second), waveEnd)
	// A movement is a run of decisions in one direction: a sample that catches the load in
	// its transition (clients finishing their last request) may split one into two steps.
	slices.SortFunc(all, func(a, b api.ScaleDecision) int { return a.Time.Compare(b.Time) })
	upRuns, downRuns, last := 0, 0, 0
	for _, d := range all {
		dir := 1
		if d.To < d.From {
			dir = -1
		}
		if dir != last {
			if dir > 0 {
				upRuns++
			} else {
				downRuns++
			}
		}
		last = dir
	}
	t.Logf("MEASURE square wave 1<->4 clients, %d periods of 12 s: %d ups in %d movements, %d downs in %d movements", periods, ups, upRuns, downs, downRuns)
	if upRuns > periods || downRuns > periods {
		t.Errorf("square wave: %d up and %d down movements over %d periods; want at most one of each per period: %+v", upRuns, downRuns, periods, all)
	}
	close(base)
	pool.wg.Wait()

	// Without load: to zero after scale_to_zero_delay (2 s, the scale_down_delay).
	idleFrom := time.Now()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, _ := u.client().GetEndpoint(ctx, "e2e-auto", "auto")
		if d := got.Deployments["blue"]; d.DesiredInstances == 0 && len(d.Instances) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("blue never went back to zero: %+v", got.Deployments["blue"])
		}
	}
	t.Logf("MEASURE back to zero (instances gone) %s after the load stopped", time.Since(idleFrom).Round(time.Millisecond))

	// On and off: 4 clients for 4 s, none for 4 s; every off scales in to zero, every on
	// starts from zero; no request fails.
	onOff := time.Now()
	for range 5 {
		stop = make(chan struct{})
		pool.start(4, uri, key, "", 200, stop)
		time.Sleep(4 * time.Second)
		close(stop)
		pool.wg.Wait()
		time.Sleep(4 * time.Second)
	}
	_, _, scaleIns := log.between(onOff, time.Now())
	_, _, allIns := log.between(sent, time.Now())
	t.Logf("MEASURE scale-in under load: %d requests, %d failed, %d scale-in decisions in the on/off run (%d in the whole test)",
		pool.ok.Load()+pool.fail.Load(), pool.fail.Load(), scaleIns, allIns)
	if n := pool.fail.Load(); n > 0 {
		t.Fatalf("%d requests failed while blue scaled; first: %v", n, pool.failures)
	}

	// A start failure from zero answers the held request 503 at once.
	sent = time.Now()
	broken := score(t, uri, key, "broken", "", "")
	t.Logf("MEASURE start failure from zero answered %d after %s", broken.status, time.Since(sent).Round(time.Millisecond))
	if broken.status != 503 {
		t.Fatalf("request to a deployment whose instance cannot start: %d; want 503", broken.status)
	}
	if time.Since(sent) > 10*time.Second {
		t.Fatalf("503 came %s after the request; want it at once, not at the end of max_queue_wait_ms", time.Since(sent))
	}

	// The hold queue's bound: tight has one instance with one slot, so 2 × 1 × 1 = 2
	// requests may be held; the next gets 429 with Retry-After at once.
	stop = make(chan struct{})
	var busy clientPool
	busy.start(3, uri, key, "tight", 2000, stop)
	var refused *http.Response
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && refused == nil; time.Sleep(50 * time.Millisecond) {
		got, _ := u.client().GetEndpoint(ctx, "e2e-auto", "auto")
		if got.Deployments["tight"].HeldRequests < 2 {
			continue
		}
		req, _ := http.NewRequest("POST", uri, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("azureml-model-deployment", "tight")
		res, err := scoringClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == 429 {
			refused = res
		}
	}
	close(stop)
	busy.wg.Wait()
	if refused == nil || refused.Header.Get("Retry-After") == "" {
		t.Fatalf("a request beyond the hold queue's bound was not refused with 429 and Retry-After: %+v", refused)
	}
	if err := u.client().DeleteEndpoint(ctx, "e2e-auto", "auto"); err != nil {
		t.Fatal(err)
	}
	u.mustTerraform("destroy", "-auto-approve")
}
