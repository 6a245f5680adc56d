package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

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

func TestAccEngineCrash_ServeKilledDuringCreate(t *testing.T) {
	if os.Getenv(resource.EnvTfAcc) == "" {
		t.Skipf("acceptance tests are skipped unless %s is set", resource.EnvTfAcc)
	}
	t.Setenv(envEndpoint, "")
	dir := shortDataDir(t)
	serve := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "engine", "serve", "--data-dir", dir, "--idle-exit", "0")
		log, err := os.OpenFile(filepath.Join(dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		log.Close()
		return cmd
	}
	var current atomic.Pointer[exec.Cmd]
	current.Store(serve())
	t.Cleanup(func() {
		cmd := current.Load()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	restarted := make(chan struct{})
	killed := killWhenCreating(t, dir, func() error {
		cmd := current.Load()
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		_ = cmd.Wait()
		// Away for longer than the old client's retries (about 1.5 s), as an operator who
		// restarts the service would be.
		go func() {
			defer close(restarted)
			time.Sleep(3 * time.Second)
			current.Store(serve())
		}()
		return nil
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
