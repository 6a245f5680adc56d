//go:build unix

package slurm

import (
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/drivertest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
)

// TestConformance runs the driver suite against a real Slurm cluster (see slurmtest).
// Jobs are submitted held (--hold), so a node stays pending until the suite makes it
// ready from outside by releasing the job (scontrol release). A node dies from outside
// when its Slurm node is set DOWN (Slurm then ends its job) or, while pending, when its
// job is cancelled with scancel.
func TestConformance(t *testing.T) {
	c := slurmtest.Start(t)
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			return newTestDriver(t, Config{SbatchArgs: []string{"--hold"}})
		},
		CreatePending: true,
		MakeReady: func(t *testing.T, d driver.Driver, key string) {
			c.Run("scontrol", "release", jobOf(t, c, d, key).ID)
		},
		KillNode: func(t *testing.T, d driver.Driver, key string) {
			j := jobOf(t, c, d, key)
			if !j.running() {
				c.Run("scancel", j.ID)
				return
			}
			c.Run("scontrol", "update", "nodename="+j.Node, "state=down", "reason=drivertest")
			t.Cleanup(func() { c.Resume(j.Node) })
		},
		WaitLimit: waitLimit,
	})
}

// jobOf returns the live job of a node, read with squeue from outside the driver.
func jobOf(t *testing.T, c *slurmtest.Cluster, d driver.Driver, key string) job {
	t.Helper()
	name := d.(*Driver).jobName(key)
	for _, j := range parseJobs(c.Run("squeue", "-h", "--name="+name, "-o", squeueFormat)) {
		if j.Name == name && j.live() {
			return j
		}
	}
	t.Fatalf("no live job named %s; squeue:\n%s", name, strings.Join(c.Jobs(), "\n"))
	return job{}
}
