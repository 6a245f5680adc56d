package slurm

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
)

// TaskPort asks the allocation's host for a TCP port free on it now: ssh.PortCommand runs
// as a step of the node's job, on its host. Nodes of a Slurm cluster are often several
// allocations of one host (jobs that share a machine), which share its ports: a port
// chosen anywhere else could be one another allocation's task holds. ErrTransient while
// the job is pending.
func (d *Driver) TaskPort(ctx context.Context, nodeKey string) (int, error) {
	_, id, err := d.readyJob(ctx, nodeKey)
	if err != nil {
		return 0, fmt.Errorf("finding a port: %w", err)
	}
	var out bytes.Buffer
	stderr, code, err := d.sh.RunShell(ctx, quoteArgs(srunArgs(id, "", ssh.PortCommand)), strings.NewReader(""), &out)
	if err != nil {
		return 0, fmt.Errorf("finding a port on node %s: %w", nodeKey, driver.Transient(err))
	}
	if code != 0 {
		// The step's stderr is in its stdout (srunArgs); srun's own messages are stderr.
		stderr = append(append(out.Bytes(), ' '), stderr...)
	}
	port, err := ssh.ParsePort(out.Bytes(), stderr, code)
	if err != nil {
		return 0, fmt.Errorf("node %s (job %s): %w", nodeKey, id, err)
	}
	return port, nil
}
