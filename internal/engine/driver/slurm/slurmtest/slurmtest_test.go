//go:build unix

package slurmtest

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestClusterRunsJobsAndStopsClean starts a cluster, runs a three-node step and a batch
// job, and checks that stopping it leaves no process naming its directory.
func TestClusterRunsJobsAndStopsClean(t *testing.T) {
	var dir string
	t.Run("cluster", func(t *testing.T) {
		c := Start(t)
		dir = c.Dir
		out := c.Run("srun", "-N3", "hostname")
		if n := strings.Count(out, "\n"); n != 3 {
			t.Fatalf("srun -N3 hostname printed %q, want 3 lines", out)
		}
		id := strings.TrimSpace(c.Run("sbatch", "--parsable", "-N1", "--output=/dev/null", "--wrap", "exec sleep 1000"))
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(strings.Join(c.Jobs(), "\n"), id+" wrap RUNNING") {
			if time.Now().After(deadline) {
				t.Fatalf("job %s not running: %v", id, c.Jobs())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if os.Getenv("SLURMTEST_EXPERIMENT") != "" {
			t.Logf("experiment: job %s, SLURM_CONF=%s", id, c.Conf)
			time.Sleep(10 * time.Minute)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s remains after the cluster stopped: %v", dir, err)
	}
	// Nothing naming the directory remains: killNaming would find it.
	if pids := naming(dir); len(pids) > 0 {
		t.Fatalf("processes naming %s remain: %v", dir, pids)
	}
}
