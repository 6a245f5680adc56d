//go:build unix

package provider

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
)

// These tests kill a real engine process with SIGKILL while the provider waits for a
// compute instance it is creating (its creation script takes a few seconds), keep it away
// for longer than a few quick retries, and check that the apply still succeeds and leaves
// the instance tracked and untainted: the plan after it is empty (the test framework
// fails a step whose follow-up plan is not) and the instance was made once.

// crashInstanceConfig is a workspace "lab" and an instance "alice" whose creation script
// takes a few seconds, on the engine the provider block names.
func crashInstanceConfig(providerBlock string) string {
	return providerBlock + `
resource "mlcompute_workspace" "test" {
  name = "lab"
}
resource "mlcompute_compute_instance" "test" {
  workspace_id              = mlcompute_workspace.test.id
  name                      = "alice"
  vm_size                   = "Standard_DS3_v2"
  idle_time_before_shutdown = "PT1H"
  setup_scripts = {
    creation_script = { inline = "sleep 4" }
  }
  timeouts = { create = "2m" }
}
`
}

// shortDataDir is a data dir short enough for the engine's unix socket; the engine it
// serves is stopped when the test ends (deleting the dir also stops it within a second).
func shortDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mlc-crash-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := client.New("unix://"+filepath.Join(dir, daemon.SocketFile), "", client.WithAttempts(1)); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = c.Shutdown(ctx)
			cancel()
		}
		os.RemoveAll(dir)
	})
	return dir
}

// killWhenCreating waits (in the background) until the engine at dir holds the instance
// "alice", then calls kill; it reports whether it did.
func killWhenCreating(t *testing.T, dir string, kill func() error) *atomic.Bool {
	t.Helper()
	var killed atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		c, err := client.New("unix://"+filepath.Join(dir, daemon.SocketFile), "", client.WithAttempts(1))
		if err != nil {
			t.Error(err)
			return
		}
		for ctx.Err() == nil {
			if got, err := c.GetCompute(ctx, "lab", "alice"); err == nil && got.State != api.InstanceRunning {
				if err := kill(); err != nil {
					t.Errorf("killing the engine: %v", err)
				}
				killed.Store(true)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return &killed
}

// aliceOnce checks, after the apply, that the engine was killed and holds the instance
// once, running.
func aliceOnce(dir string, killed *atomic.Bool) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if !killed.Load() {
			return fmt.Errorf("the engine was never killed during the create: the test did not test anything")
		}
		c, err := client.New("unix://"+filepath.Join(dir, daemon.SocketFile), "")
		if err != nil {
			return err
		}
		list, err := c.ListComputes(context.Background(), "lab")
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].Name != "alice" || list[0].State != api.InstanceRunning {
			return fmt.Errorf("engine holds %+v; want alice once, Running", list)
		}
		return nil
	}
}

// serveProcess is a real 'engine serve' process of a data dir that a test kills and
// starts again.
type serveProcess struct {
	t       *testing.T
	dir     string
	current atomic.Pointer[exec.Cmd]
}

func startServe(t *testing.T, dir string) *serveProcess {
	p := &serveProcess{t: t, dir: dir}
	p.start()
	t.Cleanup(func() {
		cmd := p.current.Load()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

func (p *serveProcess) start() {
	cmd := exec.Command(os.Args[0], "engine", "serve", "--data-dir", p.dir, "--idle-exit", "0")
	log, err := os.OpenFile(filepath.Join(p.dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Error(err)
		return
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		p.t.Error(err)
		return
	}
	p.current.Store(cmd)
}

// killAndRestartLater kills the engine with SIGKILL and starts it again after away, in
// the background; the returned channel closes once it was started again.
func (p *serveProcess) killAndRestartLater(away time.Duration) (<-chan struct{}, error) {
	cmd := p.current.Load()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	_ = cmd.Wait()
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(away)
		p.start()
	}()
	return restarted, nil
}

func TestAccEngineCrash_ServeKilledDuringCreate(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests are skipped unless %s is set", resource.EnvTfAcc)
	}
	t.Setenv(envEndpoint, "")
	dir := shortDataDir(t)
	serve := startServe(t, dir)
	var restarted <-chan struct{}
	killed := killWhenCreating(t, dir, func() error {
		// Away for longer than the old client's retries (about 1.5 s), as an operator who
		// restarts the service would be.
		var err error
		restarted, err = serve.killAndRestartLater(3 * time.Second)
		return err
	})
	t.Cleanup(func() {
		if killed.Load() {
			<-restarted
		}
	})

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			PreConfig: func() { waitForEngine(t, dir) },
			Config:    crashInstanceConfig(testAccProviderConfig("unix://" + filepath.Join(dir, daemon.SocketFile))),
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("state", knownvalue.StringExact(api.InstanceRunning)),
			},
			Check: aliceOnce(dir, killed),
		}},
	})
}

// The engine commits a create and is killed before its answer reaches the provider (a
// proxy between them forwards the create, then kills the engine and drops the provider's
// connection). The provider sends the create again with the same idempotency key once the
// engine is back, and adopts the cluster the first attempt made: no conflict, no taint,
// one cluster.
func TestAccEngineCrash_CreateAnswerLost(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests are skipped unless %s is set", resource.EnvTfAcc)
	}
	t.Setenv(envEndpoint, "")
	dir := shortDataDir(t)
	serve := startServe(t, dir)
	engineSock := filepath.Join(dir, daemon.SocketFile)
	transport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", engineSock)
	}}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "engine"})
	proxy.Transport = transport
	var (
		lost      atomic.Bool
		restarted <-chan struct{}
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/computes") && lost.CompareAndSwap(false, true) {
			out := req.Clone(req.Context())
			out.URL.Scheme, out.URL.Host, out.RequestURI = "http", "engine", ""
			resp, err := transport.RoundTrip(out)
			if err != nil {
				t.Errorf("forwarding the create: %v", err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("the engine answered the create with %d", resp.StatusCode)
			}
			if restarted, err = serve.killAndRestartLater(3 * time.Second); err != nil {
				t.Error(err)
			}
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		proxy.ServeHTTP(w, req)
	})
	proxySock := filepath.Join(dir, "proxy.sock")
	ln, err := net.Listen("unix", proxySock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if lost.Load() {
			<-restarted
		}
	})

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			PreConfig: func() { waitForEngine(t, dir) },
			Config:    testAccCPUCluster("unix://"+proxySock, `{ min_node_count = 0, max_node_count = 2 }`, ""),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(testAccClusterAddr, tfjsonpath.New("id"), knownvalue.StringExact("/workspaces/lab/computes/cpu")),
			},
			Check: func(*terraform.State) error {
				if !lost.Load() {
					return fmt.Errorf("no create answer was lost: the test did not test anything")
				}
				c, err := client.New("unix://"+engineSock, "")
				if err != nil {
					return err
				}
				list, err := c.ListComputes(context.Background(), "lab")
				if err != nil {
					return err
				}
				if len(list) != 1 || list[0].Name != "cpu" {
					return fmt.Errorf("engine holds %+v; want the cluster cpu once", list)
				}
				return nil
			},
		}},
	})
}

func TestAccEngineCrash_EmbeddedKilledDuringCreate(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests are skipped unless %s is set", resource.EnvTfAcc)
	}
	t.Setenv(envEndpoint, "")
	dir := shortDataDir(t)
	killed := killWhenCreating(t, dir, func() error {
		c, err := client.New("unix://"+filepath.Join(dir, daemon.SocketFile), "", client.WithAttempts(1))
		if err != nil {
			return err
		}
		st, err := c.Status(context.Background())
		if err != nil {
			return err
		}
		return syscall.Kill(st.PID, syscall.SIGKILL)
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: crashInstanceConfig(fmt.Sprintf("provider \"mlcompute\" {\n  data_dir = %q\n}\n", dir)),
			ConfigStateChecks: []statecheck.StateCheck{
				instanceValue("state", knownvalue.StringExact(api.InstanceRunning)),
			},
			Check: aliceOnce(dir, killed),
		}},
	})
}

// waitForEngine waits until an engine answers on dir's socket.
func waitForEngine(t *testing.T, dir string) {
	t.Helper()
	c, err := client.New("unix://"+filepath.Join(dir, daemon.SocketFile), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("engine did not start: %v", err)
	}
}
