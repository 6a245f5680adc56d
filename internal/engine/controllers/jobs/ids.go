package jobs

import (
	"fmt"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// NewJobID picks a new job's ID in a write (SubmitJob's and a pipeline's): name when
// given (refused, naming the workspace, when a job of any workspace has it, or when it is
// not a valid name), else the next job-<sequence> no job has taken, so that sequential
// IDs keep first-in-first-out order when submissions share a timestamp.
func (c *Controller) NewJobID(tx *store.Tx, name string) (string, error) {
	if name != "" {
		if !jobNameRE.MatchString(name) {
			return "", api.Errorf(api.CodeInvalid, "name", "job name %q must start with a letter or digit and hold only letters, digits, '_' and '-' (at most 255 characters)", name)
		}
		if other, taken := jobIDTaken(tx, name); taken {
			return "", api.Errorf(api.CodeConflict, "name", "a job named %q already exists (in workspace %q); give another name", name, other)
		}
		return name, nil
	}
	for {
		seq, err := tx.NextSequence(store.Jobs)
		if err != nil {
			return "", err
		}
		id := fmt.Sprintf("job-%08d", seq)
		if _, taken := jobIDTaken(tx, id); !taken {
			return id, nil
		}
	}
}
