//go:build unix

package e2e

import (
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
)

// TestE2E_SlurmPipeline: a pipeline whose steps run on Slurm nodes (each in the Slurm job
// of its node's allocation); scancel of the allocation under the running train step fails
// its job within 30 s, and the pipeline runs train again on another allocation and
// completes, requeued as node loss (the driver holds back the step's srun exit, 143,
// until its squeue poll has seen the allocation gone).
func TestE2E_SlurmPipeline(t *testing.T) {
	requireAcc(t)
	slurmtest.Start(t) // sets SLURM_CONF, which the user's environment inherits
	u := newUser(t)
	// --slurm-resources gpus: the loopback nodes are smaller than the VM size.
	u.startServe("--nodes", "slurm", "--slurm-resources", "gpus", "--slurm-workdir", t.TempDir(), "--slurm-partition", slurmtest.Partition)
	u.writeConfig(slurmClusterConfig)
	u.mustTerraform("apply", "-auto-approve")
	engineID := u.engineID()
	lost := u.pipelineLosingANode("slurm job $SLURM_JOB_ID", regexp.MustCompile(`on slurm job \d+`), func(node string) {
		// The node's allocation is the Slurm job named <engine id>/<node>.
		if out, err := exec.Command("scancel", "--name="+engineID+"/"+node).CombinedOutput(); err != nil {
			t.Fatalf("scancel of %s's allocation: %v: %s", node, err, out)
		}
	})
	if !lost {
		t.Fatal("train's job failed by its own exit; want its node lost (the allocation was cancelled)")
	}
	u.mustTerraform("destroy", "-auto-approve")
	u.waitFor("no allocation left", 30*time.Second, func() bool { return len(u.engineJobs()) == 0 })
}
