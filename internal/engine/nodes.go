package engine

import (
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// nodeRecord is a node as stored, keyed "<workspace>/<compute>/<id>". The ID is also the
// driver key: it is chosen and committed before the driver is asked for the node, so a
// crash in between is repaired by asking again with the same key.
type nodeRecord struct {
	ID        string    `json:"id"`
	Compute   string    `json:"compute"` // "<workspace>/<compute>"
	State     string    `json:"state"`
	JobID     string    `json:"job_id,omitempty"`
	Rank      int       `json:"rank,omitempty"`
	CreatedOn time.Time `json:"created_on"`
	IdleSince time.Time `json:"idle_since,omitempty"`
	// Released is set when the engine decided to release the node; the record goes once
	// the driver confirms the node is gone.
	Released bool   `json:"released,omitempty"`
	Error    string `json:"error,omitempty"`
}

func (n nodeRecord) key() string { return n.Compute + "/" + n.ID }

func (n nodeRecord) api() api.Node {
	out := api.Node{ID: n.ID, State: n.State, JobID: n.JobID, CreatedOn: n.CreatedOn}
	if n.State == api.NodeIdle {
		out.IdleSince = n.IdleSince
	}
	return out
}
