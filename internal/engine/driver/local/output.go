package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

var _ driver.OutputWatcher = (*Driver)(nil)

// WatchOutput watches a task's directory (output.log written or created, exit_code
// renamed into place when the task ends) through the process layer: on Linux inotify
// wakes the watcher on the task's write, so its output reaches a follower as it is
// written. The channel receives after each write (coalesced) and when the task ends, and
// is closed once the task's directory is removed or ctx ends. ErrNotFound if the node or
// the task directory does not exist.
func (d *Driver) WatchOutput(ctx context.Context, nodeKey, taskKey string) (<-chan struct{}, error) {
	nodeDir, err := d.nodeDir(nodeKey)
	if err != nil {
		return nil, fmt.Errorf("watching task output: %w", err)
	}
	dir, err := nodeagent.TaskDir(nodeDir, taskKey)
	if err != nil {
		return nil, fmt.Errorf("watching output of task %s: %w", taskKey, err)
	}
	changed, err := proc.WatchChanges(ctx, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("watching output of task %s on node %s: %w", taskKey, nodeKey, driver.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("watching output of task %s on node %s: %w", taskKey, nodeKey, err)
	}
	return changed, nil
}
