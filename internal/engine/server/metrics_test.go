package server_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// metricsRig is a manual engine (it acts only when the test settles it) over the fake
// driver, served over HTTP with a token and metrics.
type metricsRig struct {
	t     *testing.T
	eng   *engine.Engine
	drv   *fake.Driver
	clk   *clocktesting.FakeClock
	m     *metrics.Metrics
	url   string
	token string
}

func newMetricsRig(t *testing.T) *metricsRig {
	t.Helper()
	st := storetest.Open(t, t.TempDir())
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	drv := fake.New(clk)
	arts, err := artifacts.Open(filepath.Join(t.TempDir(), "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: st, Clock: clk, Driver: drv, Manual: true, Version: "test", DataDir: t.TempDir(), Artifacts: arts})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Options{Source: eng})
	eng.SetRecorder(m)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r := &metricsRig{t: t, eng: eng, drv: drv, clk: clk, m: m, token: "s3cret"}
	api := httptest.NewServer(server.New(server.Options{Engine: eng, Token: r.token, Metrics: m}))
	t.Cleanup(api.Close)
	r.url = api.URL
	return r
}

func (r *metricsRig) settle() {
	r.t.Helper()
	if err := r.eng.Settle(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

// scrape gets /metrics with the token and parses it with Prometheus' own text parser.
func (r *metricsRig) scrape() map[string]*dto.MetricFamily {
	r.t.Helper()
	req, _ := http.NewRequest("GET", r.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+r.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		r.t.Fatalf("GET /metrics: %s %s", res.Status, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		r.t.Fatalf("Content-Type %q; want the text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		r.t.Fatalf("the text format parser rejects /metrics: %v", err)
	}
	return families
}

// value finds the sample of a family whose labels include want; ok is false when none does.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func (r *metricsRig) expect(families map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	r.t.Helper()
	got, ok := value(families, name, labels)
	if !ok {
		r.t.Fatalf("%s%v: no such sample", name, labels)
	}
	if got != want {
		r.t.Fatalf("%s%v = %v; want %v", name, labels, got, want)
	}
}

func nodes(state string) map[string]string {
	return map[string]string{"workspace": "lab", "compute": "cpu", "state": state}
}

func jobs(status string) map[string]string {
	return map[string]string{"workspace": "lab", "compute": "cpu", "status": status}
}

func TestMetricsMoveAsAJobRunsAndANodeIsReleased(t *testing.T) {
	r := newMetricsRig(t)
	c := newClient(t, r.url, r.token)
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{
		Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 2, ScaleDownNodesAfterIdleDuration: "PT60S"},
	}); err != nil {
		t.Fatal(err)
	}
	r.settle()
	f := r.scrape()
	r.expect(f, "mlcompute_nodes", nodes("idle"), 0)
	r.expect(f, "mlcompute_nodes", nodes("running"), 0)
	r.expect(f, "mlcompute_jobs", jobs("Running"), 0)

	job, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "cpu", InstanceCount: 1, Command: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	f = r.scrape()
	r.expect(f, "mlcompute_jobs", jobs("Queued"), 1)

	r.settle()
	f = r.scrape()
	r.expect(f, "mlcompute_jobs", jobs("Queued"), 0)
	r.expect(f, "mlcompute_jobs", jobs("Running"), 1)
	r.expect(f, "mlcompute_nodes", nodes("running"), 1)

	running := r.drv.RunningTasks()
	if len(running) != 1 {
		t.Fatalf("running tasks %v; want the job's one", running)
	}
	node, task, _ := strings.Cut(running[0], "/")
	r.drv.FinishTask(node, task, 0)
	r.settle()
	f = r.scrape()
	r.expect(f, "mlcompute_jobs", jobs("Running"), 0)
	r.expect(f, "mlcompute_jobs", jobs("Completed"), 1)
	r.expect(f, "mlcompute_nodes", nodes("running"), 0)
	r.expect(f, "mlcompute_nodes", nodes("idle"), 1)

	// Past scale_down_nodes_after_idle_duration the idle node is released.
	r.clk.Step(61 * time.Second)
	r.settle()
	if got, err := c.GetJob(ctx, "lab", job.ID); err != nil || got.Status != api.JobCompleted {
		t.Fatalf("job %+v, %v; want Completed", got, err)
	}
	f = r.scrape()
	r.expect(f, "mlcompute_nodes", nodes("idle"), 0)
	var total float64
	for _, st := range metrics.NodeStates {
		v, _ := value(f, "mlcompute_nodes", nodes(st))
		total += v
	}
	if total != 0 {
		t.Fatalf("%v nodes left after the idle release; want 0", total)
	}
	// The engine fed the node lifecycle families: one node created, released, and its idle
	// release decided 1 s after its deadline (the clock jumped 61 s past a 60 s idle time).
	r.expect(f, "mlcompute_node_create_duration_seconds", map[string]string{"workspace": "lab", "compute": "cpu"}, 1)
	r.expect(f, "mlcompute_node_release_duration_seconds", map[string]string{"workspace": "lab", "compute": "cpu"}, 1)
	r.expect(f, "mlcompute_idle_release_lateness_seconds", nil, 1)
	if sum := f["mlcompute_idle_release_lateness_seconds"].GetMetric()[0].GetHistogram().GetSampleSum(); sum != 1 {
		t.Fatalf("idle release lateness %v s; want 1", sum)
	}

	// Every API call above was timed under its route pattern, never its raw path.
	r.expect(f, "mlcompute_api_request_duration_seconds",
		map[string]string{"method": "POST", "route": "/v1/workspaces/{workspace}/jobs", "code": "201"}, 1)
	r.expect(f, "mlcompute_api_request_duration_seconds",
		map[string]string{"method": "GET", "route": "/v1/workspaces/{workspace}/jobs/{job}", "code": "200"}, 1)
	r.expect(f, "mlcompute_state_scrape_errors", nil, 0)
}

// The store of job outputs is measured at scrape time: its bytes (each content once) and
// blobs, manifests included.
func TestMetricsArtifactStore(t *testing.T) {
	r := newMetricsRig(t)
	f := r.scrape()
	r.expect(f, "mlcompute_artifact_store_bytes", nil, 0)
	r.expect(f, "mlcompute_artifact_store_blobs", nil, 0)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"a", "b"} { // the same content twice: stored once
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 5, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte("model")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := r.eng.Artifacts().Intake(context.Background(), artifacts.TypeFolder, &buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Release()
	manifest, err := in.Manifest.Encode()
	if err != nil {
		t.Fatal(err)
	}
	f = r.scrape()
	r.expect(f, "mlcompute_artifact_store_bytes", nil, float64(5+len(manifest)))
	r.expect(f, "mlcompute_artifact_store_blobs", nil, 2)
}

// The node lifecycle families as the Recorder fills them (the test above has the engine do
// it; here the test plays the engine's part with known durations).
func TestMetricsRecorderFamilies(t *testing.T) {
	r := newMetricsRig(t)
	var rec metrics.Recorder = r.m
	rec.NodeCreated("lab/cpu", 3*time.Second)
	rec.NodeCreated("lab/cpu", 5*time.Second)
	rec.NodeReleased("lab/cpu", 2*time.Second)
	rec.IdleReleaseLateness(1500 * time.Millisecond)
	f := r.scrape()
	r.expect(f, "mlcompute_node_create_duration_seconds", map[string]string{"workspace": "lab", "compute": "cpu"}, 2)
	r.expect(f, "mlcompute_node_release_duration_seconds", map[string]string{"workspace": "lab", "compute": "cpu"}, 1)
	r.expect(f, "mlcompute_idle_release_lateness_seconds", nil, 1)
	h := f["mlcompute_node_create_duration_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleSum() != 8 {
		t.Fatalf("create duration sum %v; want 8", h.GetSampleSum())
	}
}

func TestMetricsScoringMiddleware(t *testing.T) {
	r := newMetricsRig(t)
	// A stand-in router: it names the deployment it routed to, as the real one does.
	routed := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/sentiment/") {
			w.Header().Set(metrics.DeploymentHeader, "blue")
			w.WriteHeader(http.StatusOK)
			return
		}
		http.NotFound(w, req)
	})
	srv := httptest.NewServer(r.m.Scoring(routed))
	defer srv.Close()
	for _, p := range []string{"/sentiment/score", "/sentiment/score", "/no-such-endpoint/score", "/x/y"} {
		res, err := http.Post(srv.URL+p, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	f := r.scrape()
	r.expect(f, "mlcompute_scoring_request_duration_seconds", map[string]string{"endpoint": "sentiment", "deployment": "blue", "code": "200"}, 2)
	// Unknown names never become label values.
	r.expect(f, "mlcompute_scoring_request_duration_seconds", map[string]string{"endpoint": "", "deployment": "", "code": "404"}, 2)
	if _, ok := value(f, "mlcompute_scoring_request_duration_seconds", map[string]string{"endpoint": "no-such-endpoint"}); ok {
		t.Fatal("an unknown endpoint name became a label value")
	}
}

func TestMetricsNeedTheToken(t *testing.T) {
	r := newMetricsRig(t)
	for _, auth := range []string{"", "Bearer wrong"} {
		req, _ := http.NewRequest("GET", r.url+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /metrics with %q: %s; want 401", auth, res.Status)
		}
	}
}
