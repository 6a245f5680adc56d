//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt/containerrttest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
)

// The job of examples/container-job prints the same image on every driver that runs
// containers; these tests run it where the example does not: an attached machine and Slurm.

// TestE2E_ContainerJobOnAttachedMachine: the example's configuration with an attached
// machine (a real sshd test host whose login may use the machine's containerd) beside the
// local cluster. The same job runs on both and prints the image's name; on the machine it
// runs as its login, with the engine's binary and the archive copied there once.
func TestE2E_ContainerJobOnAttachedMachine(t *testing.T) {
	requireAcc(t)
	t.Parallel()
	h := sshtest.Start(t)
	sock := containerrttest.StartForGroup(t, h.GID) // before newUser: its clean-up stops the engine first
	u := newUser(t)
	u.env = append(u.env, containerrt.AddressEnv+"="+sock)
	dir := filepath.Join(u.copyExamples(), "container-job")
	writeImage(t, filepath.Join(dir, "images", "train.tar"), "2.5")
	appendHCL(t, filepath.Join(dir, "main.tf"), `
resource "mlcompute_attached_compute" "box" {
  name         = "box"
  workspace_id = mlcompute_workspace.lab.id
  virtual_machine = {
    address     = "`+h.Address+`"
    ssh_port    = `+strconv.Itoa(h.Port)+`
    username    = "`+h.User+`"
    private_key = file("`+h.KeyFile(t)+`")
  }
}
`)
	u.mustTerraformIn(dir, "apply", "-auto-approve")

	if _, log := u.containerJob(dir); !strings.Contains(log, "image: mlctest 2.5\n") {
		t.Fatalf("the job on the local cluster:\n%s", log)
	}
	// The machine's containerd is not at the default socket: the job names it.
	for range 2 {
		j, log := u.containerJob(dir, "--compute", "box", "--env", containerrt.AddressEnv+"="+sock)
		if !strings.Contains(log, "image: mlctest 2.5\n") || !strings.Contains(log, "rank: 0 of 1\n") {
			t.Fatalf("job %s on the attached machine:\n%s", j.ID, log)
		}
		t.Logf("job %s on the attached machine ran from %s to %s", j.ID, j.StartedAt.Format("15:04:05.000"), j.EndedAt.Format("15:04:05.000"))
	}
	for sub, want := range map[string]int{"bin": 1, "images": 1} {
		entries, err := os.ReadDir(filepath.Join(h.Home, ".mlcompute", sub))
		if err != nil || len(entries) != want {
			t.Fatalf("the machine's ~/.mlcompute/%s holds %d entries (%v); want %d", sub, len(entries), err, want)
		}
	}
	u.mustTerraformIn(dir, "destroy", "-auto-approve")
}

// TestE2E_SlurmContainerJob: the example, unchanged, on an engine whose nodes are jobs of a
// real Slurm cluster: the job's step runs in the image on the Slurm node, with the node's
// containerd (named in the engine's environment, which the steps inherit).
func TestE2E_SlurmContainerJob(t *testing.T) {
	requireAcc(t)
	slurmtest.Start(t)
	sock := startContainerd(t)
	u := newUser(t)
	u.env = append(u.env, containerrt.AddressEnv+"="+sock)
	workdir, err := os.MkdirTemp("", "mlc-e2e-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(workdir) })
	u.startServe("--nodes", "slurm", "--slurm-resources", "gpus", "--slurm-workdir", workdir, "--slurm-partition", slurmtest.Partition)
	dir := filepath.Join(u.copyExamples(), "container-job")
	writeImage(t, filepath.Join(dir, "images", "train.tar"), "2.5")
	u.mustTerraformIn(dir, "apply", "-auto-approve")
	j, log := u.containerJob(dir)
	if !strings.Contains(log, "image: mlctest 2.5\n") || !strings.Contains(log, "rank: 0 of 1\n") {
		t.Fatalf("job %s on a Slurm node:\n%s", j.ID, log)
	}
	if _, err := os.Stat(filepath.Join(workdir, ".mlcompute", "images")); err != nil {
		t.Fatalf("the archive was not copied to the Slurm work dir: %v", err)
	}
	u.mustTerraformIn(dir, "destroy", "-auto-approve")
}

// appendHCL adds hcl at the end of the configuration file.
func appendHCL(t *testing.T, file, hcl string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(hcl); err != nil {
		t.Fatal(err)
	}
}
