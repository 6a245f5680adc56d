package ui_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
)

// chromiumPath finds Debian's chromium, which make test installs (scripts/test-deps.sh);
// without one the test fails, naming the package.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: make test installs it (scripts/test-deps.sh), or apt-get install chromium")
	return ""
}

// artifactDir is where screenshots land: $MLCOMPUTE_ARTIFACTS, else .artifacts/ui at the
// module root (git-ignored).
func artifactDir(t *testing.T) string {
	dir := os.Getenv("MLCOMPUTE_ARTIFACTS")
	if dir == "" {
		root, err := filepath.Abs("../../..")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
			t.Fatalf("module root not found from %s", root)
		}
		dir = filepath.Join(root, ".artifacts")
	}
	dir = filepath.Join(dir, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStatusPageShowsAClusterScaleUpAndDown opens the status page in a real headless
// Chromium, logged in through a one-time link, and watches a cluster get a node for a job,
// run it, and release the node once idle.
func TestStatusPageShowsAClusterScaleUpAndDown(t *testing.T) {
	const token = "ui-test-token"
	e := enginetest.Start(t, enginetest.Options{Token: token})
	p := openPage(t, e, token, server.Options{Clock: e.Clock})
	c, bctx, ctx := p.c, p.ctx, context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{
		Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 2, ScaleDownNodesAfterIdleDuration: "PT60S"},
	}); err != nil {
		t.Fatal(err)
	}
	p.login()
	p.waitFor("compute lab/cpu", `!!document.querySelector('[data-compute="lab/cpu"]')`)
	nodesShown := func() int {
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-compute="lab/cpu"] .node').length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor := p.waitFor
	if n := nodesShown(); n != 0 {
		t.Fatalf("%d nodes shown before any job; min_node_count is 0", n)
	}

	job, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "cpu", InstanceCount: 1, Command: []string{"python", "train.py"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("a running node and the running job",
		fmt.Sprintf(`!!document.querySelector('[data-compute="lab/cpu"] .node[data-state="running"]') &&
			!!document.querySelector('[data-job=%q][data-status="Running"]')`, job.ID))
	var node, task string
	for deadline := time.Now().Add(10 * time.Second); node == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if running := e.Driver.RunningTasks(); len(running) == 1 {
			node, task, _ = strings.Cut(running[0], "/")
		}
	}
	if node == "" {
		t.Fatal("the job's task never started on the fake driver")
	}
	e.Driver.AppendOutput(node, task, []byte("epoch 1/1 loss=0.042\n"))
	waitFor("the job's output", `document.querySelector('#app').innerText.includes('epoch 1/1 loss=0.042')`)
	dir := artifactDir(t)
	screenshot(t, bctx, filepath.Join(dir, "status-page-scaled-up.png"))

	e.Driver.FinishTask(node, task, 0)
	waitFor("the job completed and its node idle",
		fmt.Sprintf(`!!document.querySelector('[data-job=%q][data-status="Completed"]') &&
			!!document.querySelector('[data-compute="lab/cpu"] .node[data-state="idle"]')`, job.ID))
	// Past scale_down_nodes_after_idle_duration the engine releases the idle node.
	e.Clock.Step(61 * time.Second)
	waitFor("the cluster back at zero nodes", `document.querySelector('[data-compute="lab/cpu"]').dataset.nodes === "0"`)
	screenshot(t, bctx, filepath.Join(dir, "status-page-scaled-down.png"))
	t.Logf("screenshots in %s", dir)
}

// page is a headless Chromium on the status page of an engine served over TCP (a browser
// cannot reach a unix socket), and a client of the same server, since login codes live in
// the server that made them.
type page struct {
	t   *testing.T
	url string
	c   *client.Client
	ctx context.Context
}

// openPage serves e's API with opts (its Engine, Token and Metrics set here) and opens a
// browser on /ui without a session, checking that the page refuses it.
func openPage(t *testing.T, e *enginetest.Engine, token string, opts server.Options) *page {
	browser := chromiumPath(t)
	opts.Engine, opts.Token, opts.Metrics = e.Engine, token, e.Metrics
	srv := httptest.NewServer(server.New(opts))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-dev-shm-usage", true))...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	bctx, cancelTimeout := context.WithTimeout(bctx, 150*time.Second)
	t.Cleanup(cancelTimeout)
	p := &page{t: t, url: srv.URL, c: c, ctx: bctx}

	// Without a session the page refuses.
	if _, err := chromedp.Run(bctx, chromedp.Navigate(srv.URL+"/ui/")); err != nil {
		t.Fatal(err)
	}
	denied, err := chromedp.Run(bctx, chromedp.Text("body"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(denied, "mlcompute ui") {
		t.Fatalf("page without a session shows %q; want the hint to run mlcompute ui", denied)
	}
	return p
}

// login opens the one-time link `mlcompute ui` would print.
func (p *page) login() {
	p.t.Helper()
	login, err := p.c.CreateUILogin(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := chromedp.Run(p.ctx, chromedp.Navigate(p.url+login.Path)); err != nil {
		p.t.Fatal(err)
	}
}

// waitFor waits until js is true in the page (it polls the engine every second).
func (p *page) waitFor(what, js string) {
	p.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ok, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			p.t.Fatal(err)
		}
		if ok {
			return
		}
	}
	status, _ := chromedp.Run(p.ctx, chromedp.Text("#updated"))
	body, _ := chromedp.Run(p.ctx, chromedp.Text("#app"))
	p.t.Fatalf("the page never showed %s; it shows (%s):\n%s", what, status, body)
}

// count returns how many elements match a CSS selector.
func (p *page) count(selector string) int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, selector)))
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}

// attr returns an attribute of the first element matching a CSS selector ("" if none).
func (p *page) attr(selector, name string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {getAttribute: () => ""}).getAttribute(%q) || ""`, selector, name)))
	if err != nil {
		p.t.Fatal(err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	// Quality 100 gives a PNG; below it, a JPEG.
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
