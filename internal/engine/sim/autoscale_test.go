package sim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// TestAutoscaleSimulation drives autoscaled deployments of the real engine (fake clock,
// fake driver, real store, the real router over real loopback backends that hold each
// request until the harness ends it) through random load, and checks after every step:
//
//   - the desired count stays within [min_instances, max_instances];
//   - no instance's node is terminated while its backend still has a request (scale-in
//     drains, down to zero included);
//   - no request fails for lack of an instance: every one ends 200 or, past the hold
//     queue's bound or max_queue_wait_ms, 429;
//   - at constant load with ±10% noise, once the count has settled (the first half of the
//     phase), the autoscaler makes no decision at all.
func TestAutoscaleSimulation(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if *flagSeed != 0 {
		seeds = []uint64{*flagSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			dir, err := os.MkdirTemp("", "sim-as-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			w, err := newWorld(seed, dir, fake.Options{TaskPort: fake.LoopbackPort}) // backends listen on the instances' ports
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			h := &loadHarness{w: w, t: t, backends: map[int]*heldBackend{}}
			defer h.closeAll()
			if err := h.run(); err != nil {
				t.Fatal(err)
			}
			t.Logf("seed %d: %d requests (%d 200, %d 429), %d instances started, %d terminated, %d checks",
				seed, h.sent.Load(), h.ok.Load(), h.busy.Load(), h.started, h.terminated, w.checks)
		})
	}
}

// heldBackend is an instance's process: it holds each request until released.
type heldBackend struct {
	srv      *httptest.Server
	node     string
	inFlight atomic.Int64
}

type loadHarness struct {
	w        *world
	t        *testing.T
	mu       sync.Mutex
	backends map[int]*heldBackend // by port
	// open are the requests in flight, each with when the harness ends it.
	open                []openRequest
	sent, ok, busy      atomic.Int64
	failed              atomic.Int64
	failures            []string
	started, terminated int
	minI, maxI          int64
	wg                  sync.WaitGroup
}

type openRequest struct {
	end     time.Time
	release chan struct{}
}

const asEndpoint = "auto"

func (h *loadHarness) run() error {
	w := h.w
	h.minI, h.maxI = int64(w.rng.IntN(2)), int64(3+w.rng.IntN(4))
	dep := api.DeploymentSpec{
		InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: []string{"serve"},
		RequestSettings: &api.RequestSettings{RequestTimeoutMS: 60000, MaxConcurrentRequestsPerInstance: 2, MaxQueueWaitMS: 120000},
		ReadinessProbe:  &api.Probe{InitialDelay: "PT0S", Period: "PT1S"},
		LivenessProbe:   &api.Probe{InitialDelay: "PT0S", Period: "PT10S"},
		ScaleSettings: &api.EndpointScaleSettings{Type: api.ScaleTypeTargetUtilization, MinInstances: h.minI, MaxInstances: h.maxI,
			PollingInterval: "PT1S", ScaleDownDelay: "PT5S", ScaleToZeroDelay: "PT8S"},
	}
	w.e.SetProber(func(_ context.Context, raw string, _ time.Duration) bool { return h.serving(raw) })
	if _, err := w.e.CreateEndpoint(context.Background(), "lab", api.EndpointSpec{
		Name: asEndpoint, Deployments: map[string]api.DeploymentSpec{"blue": dep}, Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		return err
	}
	// Load starts once the endpoint is provisioned, as after terraform apply.
	for i := 0; ; i++ {
		if err := w.e.Settle(context.Background()); err != nil {
			return w.fail("the engine settles", "%v", err)
		}
		h.startBackends()
		ep, err := w.e.GetEndpoint(context.Background(), "lab", asEndpoint)
		if err == nil && ep.ProvisioningState == api.ProvisioningSucceeded {
			break
		}
		if i > 100 {
			return w.fail("the endpoint is provisioned", "still %v after %d steps", ep, i)
		}
		w.clk.Step(500 * time.Millisecond)
	}
	keys, err := w.e.GetEndpointKeys(context.Background(), "lab", asEndpoint)
	if err != nil {
		return err
	}
	// Phases: random walks of the load, silences (down to min, and zero), and a constant
	// load with noise.
	capacity := int(h.maxI) * 2
	load := 0
	for phase := range 8 {
		constant := phase%4 == 3
		level := w.rng.IntN(capacity + 1)
		var half time.Time
		for step := range 60 {
			w.step++
			switch {
			case phase%4 == 1:
				load = 0 // silence: back to min, and to zero
			case constant:
				noise := w.rng.IntN(2*(level/10)+1) - level/10
				load = level + noise
			default:
				load = max(0, min(capacity+2, load+w.rng.IntN(5)-2))
			}
			h.adjust(load, keys.PrimaryKey, constant)
			w.clk.Step(time.Duration(200+w.rng.IntN(600)) * time.Millisecond)
			if err := w.e.Settle(context.Background()); err != nil {
				return w.fail("the engine settles", "%v", err)
			}
			h.startBackends()
			if err := h.check(); err != nil {
				return err
			}
			if constant && step == 30 {
				half = w.now()
			}
		}
		if constant {
			h.trim(0) // the phase's requests end with it
			if n := h.decisionsSince(half); n > 0 {
				ep, _ := w.e.GetEndpoint(context.Background(), "lab", asEndpoint)
				var late []api.ScaleDecision
				for _, d := range ep.Deployments["blue"].ScaleDecisions {
					if d.Time.After(half) {
						late = append(late, d)
					}
				}
				return w.fail("no flapping at constant load", "load %d±10%%: %d decisions in the second half of the phase (from %s): %+v (ok %d, 429 %d, failed %d %v)", level, n, half, late, h.ok.Load(), h.busy.Load(), h.failed.Load(), h.failures)
			}
		}
	}
	// Drain: end every request, then silence until zero or min.
	h.adjust(0, keys.PrimaryKey, false)
	for range 40 {
		h.endDue(w.now().Add(time.Hour))
		w.clk.Step(time.Second)
		_ = w.e.Settle(context.Background())
		if err := h.check(); err != nil {
			return err
		}
	}
	h.wg.Wait()
	if n := h.failed.Load(); n > 0 {
		return w.fail("no request fails for lack of an instance", "%d failed: %s", n, strings.Join(h.failures, "; "))
	}
	return nil
}

// adjust starts or ends requests so that about load are open: new ones get a random
// duration in simulated time. With steady, requests last until trimmed, so exactly load
// are open: the constant phases' load is the router's in-flight count, noise included.
func (h *loadHarness) adjust(load int, key string, steady bool) {
	h.endDue(h.w.now())
	if steady {
		h.trim(load)
	}
	h.mu.Lock()
	n := len(h.open)
	h.mu.Unlock()
	for ; n < load; n++ {
		release := make(chan struct{})
		end := h.w.now().Add(time.Duration(300+h.w.rng.IntN(3000)) * time.Millisecond)
		if steady {
			end = h.w.now().Add(24 * time.Hour)
		}
		h.mu.Lock()
		h.open = append(h.open, openRequest{end: end, release: release})
		h.mu.Unlock()
		h.sent.Add(1)
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			req := httptest.NewRequest("POST", "/"+asEndpoint+"/score?r="+strconv.FormatInt(h.sent.Load(), 10), strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("X-Release", fmt.Sprintf("%p", release))
			registerRelease(fmt.Sprintf("%p", release), release)
			rec := httptest.NewRecorder()
			h.w.e.ScoringHandler().ServeHTTP(rec, req)
			switch rec.Code {
			case http.StatusOK:
				h.ok.Add(1)
			case http.StatusTooManyRequests:
				h.busy.Add(1)
			default:
				h.failed.Add(1)
				h.mu.Lock()
				if len(h.failures) < 5 {
					h.failures = append(h.failures, fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String())))
				}
				h.mu.Unlock()
			}
		}()
	}
}

// trim ends the newest requests beyond n.
func (h *loadHarness) trim(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.open) > n {
		close(h.open[len(h.open)-1].release)
		h.open = h.open[:len(h.open)-1]
	}
}

// endDue releases the requests whose time has come.
func (h *loadHarness) endDue(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.open[:0]
	for _, r := range h.open {
		if !r.end.After(now) {
			close(r.release)
		} else {
			kept = append(kept, r)
		}
	}
	h.open = kept
}

// releases maps a request's X-Release header to its channel, so the backend that receives it
// waits for the harness.
var releases sync.Map

func registerRelease(id string, ch chan struct{}) { releases.Store(id, ch) }

// startBackends starts a held backend on the port of each started instance that has none.
func (h *loadHarness) startBackends() {
	var recs []struct {
		id   string
		port int
	}
	for _, in := range h.storedInstances() {
		if !in.StartedAt.IsZero() {
			recs = append(recs, struct {
				id   string
				port int
			}{in.ID, in.Port})
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range recs {
		if h.backends[r.port] != nil {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(r.port))
		if err != nil {
			continue
		}
		b := &heldBackend{node: r.id}
		b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodGet {
				return // probe
			}
			b.inFlight.Add(1)
			defer b.inFlight.Add(-1)
			if ch, ok := releases.Load(req.Header.Get("X-Release")); ok {
				<-ch.(chan struct{})
			}
			_, _ = rw.Write([]byte("ok"))
		}))
		b.srv.Listener.Close()
		b.srv.Listener = ln
		b.srv.Start()
		h.backends[r.port] = b
		h.started++
	}
}

// serving is the probe: an instance is ready once its backend listens.
func (h *loadHarness) serving(raw string) bool {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(strings.SplitN(strings.TrimPrefix(raw, "http://"), "/", 2)[0], ""))
	p, _ := strconv.Atoi(port)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.backends[p] != nil
}

func (h *loadHarness) check() error {
	w := h.w
	w.checks++
	ep, err := w.e.GetEndpoint(context.Background(), "lab", asEndpoint)
	if err != nil {
		return w.fail("the engine answers", "%v", err)
	}
	d := ep.Deployments["blue"]
	if d.DesiredInstances < h.minI || d.DesiredInstances > h.maxI {
		return w.fail("min and max", "desired %d outside [%d, %d]", d.DesiredInstances, h.minI, h.maxI)
	}
	live := 0
	for _, in := range d.Instances {
		if in.State != api.EndpointInstanceDraining {
			live++
		}
	}
	if int64(live) > h.maxI {
		return w.fail("min and max", "%d live instances above max %d", live, h.maxI)
	}
	nodes := map[string]bool{}
	for _, n := range w.drv.Nodes() {
		nodes[n] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for port, b := range h.backends {
		if nodes[b.node] {
			continue
		}
		if n := b.inFlight.Load(); n > 0 {
			return w.fail("no instance removed while it has a request", "instance %s terminated with %d requests in flight", b.node, n)
		}
		// The process goes with its node.
		b.srv.Close()
		delete(h.backends, port)
		h.terminated++
	}
	return nil
}

// decisionsSince counts the decisions after t (the status keeps the last 20, more than a
// half phase can hold without failing this check anyway).
func (h *loadHarness) decisionsSince(t time.Time) int {
	ep, err := h.w.e.GetEndpoint(context.Background(), "lab", asEndpoint)
	if err != nil {
		return 0
	}
	n := 0
	for _, d := range ep.Deployments["blue"].ScaleDecisions {
		if d.Time.After(t) {
			n++
		}
	}
	return n
}

// storedInstances reads the instances as stored (with their ports).
func (h *loadHarness) storedInstances() []model.EndpointInstance {
	var out []model.EndpointInstance
	_ = h.w.st.View(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, "lab", asEndpoint)
		out = rec.Instances
		return err
	})
	return out
}

func (h *loadHarness) closeAll() {
	h.mu.Lock()
	for _, r := range h.open {
		close(r.release)
	}
	h.open = nil
	for _, b := range h.backends {
		b.srv.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}
