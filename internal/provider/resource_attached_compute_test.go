//go:build unix

package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
)

// The acceptance tests of mlcompute_attached_compute run against real sshd test hosts
// (sshtest: a network namespace each, or a loopback address) and the engine's real ssh
// driver.

// vmBody is an attached compute's body: name, description and virtual_machine with the
// given credential lines.
func vmBody(name, description string, h *sshtest.Host, credential string) string {
	return fmt.Sprintf(`  name        = %q
  description = %q
  virtual_machine = {
    address  = %q
    ssh_port = %d
    username = %q
    %s
  }`, name, description, h.Address, h.Port, h.User, credential)
}

func TestAccAttachedCompute_Key(t *testing.T) {
	e, c := testAccEngine(t, enginetest.Options{})
	h := sshtest.Start(t)
	key := h.KeyFile(t)
	cred := fmt.Sprintf("private_key = file(%q)", key)
	id := api.ComputeID("lab", "gpu-box")

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccAttachedDetached(c, "gpu-box"),
		Steps: []resource.TestStep{
			{
				Config: testAccAttachedConfig(e.Endpoint, vmBody("gpu-box", "first", h, cred)),
				ConfigStateChecks: []statecheck.StateCheck{
					attachedValue("id", knownvalue.StringExact(id)),
					attachedValue("virtual_machine.host_key_fingerprint", knownvalue.StringExact(h.Fingerprint)),
					attachedValue("virtual_machine.ssh_port", knownvalue.Int64Exact(int64(h.Port))),
					attachedValue("virtual_machine.password", knownvalue.Null()),
					attachedValue("vcpus", knownvalue.Int64Func(func(v int64) error {
						if v < 1 {
							return fmt.Errorf("vcpus %d", v)
						}
						return nil
					})),
					attachedValue("memory_gb", positive),
					attachedValue("created_on", knownvalue.StringExact("2026-01-05T09:00:00Z")),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check: engineCompute(c, "lab", "gpu-box", func(got *api.Compute) error {
					if got.VirtualMachine == nil || got.VirtualMachine.PrivateKey != "" || got.VirtualMachine.Password != "" {
						return fmt.Errorf("the engine returned %+v: want the machine without its secrets", got.VirtualMachine)
					}
					return nil
				}),
			},
			{
				Config:            testAccAttachedConfig(e.Endpoint, vmBody("gpu-box", "second", h, cred)),
				ConfigPlanChecks:  updatedInPlace(testAccAttachedAddr),
				ConfigStateChecks: []statecheck.StateCheck{attachedValue("description", knownvalue.StringExact("second"))},
			},
			{
				// The engine never returns the key, so an import cannot hold it.
				ResourceName:                         testAccAttachedAddr,
				ImportState:                          true,
				ImportStateId:                        id,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "id",
				ImportStateVerifyIgnore:              []string{"virtual_machine.private_key", "virtual_machine.password", "timeouts"},
			},
			{
				// A pinned fingerprint written into the configuration plans nothing.
				Config: testAccAttachedConfig(e.Endpoint, vmBody("gpu-box", "second", h,
					cred+fmt.Sprintf("\n    host_key_fingerprint = %q", h.Fingerprint))),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

func TestAccAttachedCompute_PasswordAndRotation(t *testing.T) {
	e, c := testAccEngine(t, enginetest.Options{})
	h := sshtest.Start(t)
	password := fmt.Sprintf("password = %q", h.Password)
	key := fmt.Sprintf("private_key = file(%q)", h.KeyFile(t))

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             testAccAttachedDetached(c, "pw-box"),
		Steps: []resource.TestStep{
			{
				Config: testAccAttachedConfig(e.Endpoint, vmBody("pw-box", "", h, password)),
				ConfigStateChecks: []statecheck.StateCheck{
					attachedValue("virtual_machine.host_key_fingerprint", knownvalue.StringExact(h.Fingerprint)),
					attachedValue("virtual_machine.password", knownvalue.StringExact(h.Password)),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// A rotated credential the machine refuses fails on that attribute and
				// leaves the working one in place.
				Config:      testAccAttachedConfig(e.Endpoint, vmBody("pw-box", "", h, `password = "not-the-password"`)),
				ExpectError: expectError("Cannot Update Attached Compute", "authentication as user", "failed"),
			},
			{
				Config:           testAccAttachedConfig(e.Endpoint, vmBody("pw-box", "now a key", h, key)),
				ConfigPlanChecks: updatedInPlace(testAccAttachedAddr),
				ConfigStateChecks: []statecheck.StateCheck{
					attachedValue("virtual_machine.password", knownvalue.Null()),
					attachedValue("description", knownvalue.StringExact("now a key")),
				},
				Check: testAccJobRunsOn(c, "pw-box", h.Address),
			},
		},
	})
}

func TestAccAttachedCompute_Failures(t *testing.T) {
	e, c := testAccEngine(t, enginetest.Options{})
	h := sshtest.Start(t)
	key := fmt.Sprintf("private_key = file(%q)", h.KeyFile(t))
	closed := *h
	closed.Port = h.ClosedPort(t)
	wrongKey := "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
	config := func(body string) string { return testAccAttachedConfig(e.Endpoint, body) }

	steps := []resource.TestStep{
		{
			Config:      config(vmBody("box-a", "", h, key+fmt.Sprintf("\n    host_key_fingerprint = %q", wrongKey))),
			ExpectError: expectError("Cannot Attach Machine", "host key of", "does not match: expected "+wrongKey+", got "+h.Fingerprint),
		},
		{
			Config:      config(vmBody("box-a", "", h, `password = "wrong-password"`)),
			ExpectError: expectError("Cannot Attach Machine", "authentication as user", h.User, "failed"),
		},
		// Plan-time checks, before anything connects.
		{
			Config:      config(vmBody("box-a", "", h, key+"\n    password = \"x\"")),
			ExpectError: expectError("Conflicting Credentials", "virtual_machine.password and virtual_machine.private_key are both set"),
		},
		{
			Config:      config(vmBody("box-a", "", h, key+"\n    host_key_fingerprint = \"md5:aa:bb\"")),
			ExpectError: expectError("Invalid Host Key Fingerprint", "not an OpenSSH SHA256 fingerprint"),
		},
		{
			Config:      config(vmBody("box-a", "", h, `private_key = "not a key"`)),
			ExpectError: expectError("Invalid Private Key", "not a PEM private key"),
		},
		{
			Config:      config(strings.Replace(vmBody("box-a", "", h, key), "ssh_port = ", "ssh_port = 70000 + ", 1)),
			ExpectError: expectError("Invalid Attribute Value", "between 1 and 65535"),
		},
	}
	if h.Namespace != "" {
		steps = append(steps, resource.TestStep{
			PreConfig:   func() { h.SetUnreachable(t, true) },
			Config:      config(vmBody("box-a", "", h, key)),
			ExpectError: expectError("Cannot Attach Machine", "host "+h.Address+":22 is unreachable"),
		})
	}
	// Last, a valid configuration: the test's final destroy plans with it.
	steps = append(steps, resource.TestStep{
		PreConfig: func() {
			if h.Namespace != "" {
				h.SetUnreachable(t, false)
			}
		},
		Config:      config(vmBody("box-a", "", &closed, key)),
		ExpectError: expectError("Cannot Attach Machine", "connection to", "was refused", "check ssh_port"),
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    steps,
		CheckDestroy: func(*terraform.State) error {
			list, err := c.ListComputes(context.Background(), "lab")
			if err == nil && len(list) > 0 {
				return fmt.Errorf("failed attaches left computes behind: %v", list)
			}
			return nil
		},
	})
}

// TestAccAttachedCompute_JobsOnTwoHosts attaches two machines and runs a job on each; each
// job's output shows the SSH server address it ran on. The first job's connection is cut
// while it runs, and its status, exit code and output still come out right.
func TestAccAttachedCompute_JobsOnTwoHosts(t *testing.T) {
	e, c := testAccEngine(t, enginetest.Options{})
	h1, h2 := sshtest.Start(t), sshtest.Start(t)
	k1 := fmt.Sprintf("private_key = file(%q)", h1.KeyFile(t))
	k2 := fmt.Sprintf("private_key = file(%q)", h2.KeyFile(t))
	if h1.Address == h2.Address {
		t.Fatalf("both hosts got address %s", h1.Address)
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: testAccAttachedConfig(e.Endpoint, vmBody("box-one", "", h1, k1), vmBody("box-two", "", h2, k2)),
			Check: func(*terraform.State) error {
				ctx := context.Background()
				gate := filepath.Join(h1.Home, "go")
				cmd := []string{"sh", "-c", `echo "server $SSH_CONNECTION"; while [ ! -f "$1" ]; do sleep 0.05; done; echo done; exit 7`, "sh", gate}
				j1, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "box-one", Command: cmd})
				if err != nil {
					return err
				}
				j2, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "box-two", Command: []string{"sh", "-c", `echo "server $SSH_CONNECTION"`}})
				if err != nil {
					return err
				}
				if err := waitJob(c, j1.ID, api.JobRunning); err != nil {
					return err
				}
				dropped := 0
				for range 200 {
					if dropped = h1.DropConnections(t); dropped > 0 {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if dropped == 0 {
					return fmt.Errorf("no SSH connection to %s to drop", h1.Address)
				}
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					return err
				}
				for _, w := range []struct {
					id, status, host, tail string
					code                   int
				}{{j1.ID, api.JobFailed, h1.Address, "done\n", 7}, {j2.ID, api.JobCompleted, h2.Address, "", 0}} {
					if err := waitJob(c, w.id, w.status); err != nil {
						return err
					}
					got, err := c.GetJob(ctx, "lab", w.id)
					if err != nil {
						return err
					}
					if got.ExitCode == nil || *got.ExitCode != w.code {
						return fmt.Errorf("job %s exit code %v, want %d", w.id, got.ExitCode, w.code)
					}
					logs, err := c.JobLogs(ctx, "lab", w.id, 0, 0)
					if err != nil {
						return err
					}
					out := string(logs.Data)
					if !strings.Contains(out, " "+w.host+" ") || !strings.HasSuffix(out, w.tail) {
						return fmt.Errorf("job %s output %q: want it to show server %s and end with %q", w.id, out, w.host, w.tail)
					}
				}
				return nil
			},
		}},
	})
}

// testAccJobRunsOn submits a job to the attached compute and checks it ran on the host.
func testAccJobRunsOn(c *client.Client, compute, host string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		j, err := c.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: compute, Command: []string{"sh", "-c", `echo "server $SSH_CONNECTION"`}})
		if err != nil {
			return err
		}
		if err := waitJob(c, j.ID, api.JobCompleted); err != nil {
			return err
		}
		logs, err := c.JobLogs(context.Background(), "lab", j.ID, 0, 0)
		if err != nil {
			return err
		}
		if !strings.Contains(string(logs.Data), " "+host+" ") {
			return fmt.Errorf("job output %q does not show server %s", logs.Data, host)
		}
		return nil
	}
}
