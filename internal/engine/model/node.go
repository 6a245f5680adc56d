package model

import (
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Node is a node as stored, keyed "<workspace>/<compute>/<id>". The ID is also the
// driver key: it is chosen and committed before the driver is asked for the node, so a
// crash in between is repaired by asking again with the same key.
type Node struct {
	ID      string `json:"id"`
	Compute string `json:"compute"` // "<workspace>/<compute>"
	State   string `json:"state"`
	JobID   string `json:"job_id,omitempty"`
	Rank    int    `json:"rank,omitempty"`
	// Task is the driver key of the task the node runs for JobID (job, attempt and rank).
	Task string `json:"task,omitempty"`
	// Admitted means the node holds capacity: the driver was (or is being) asked for it, and
	// it holds the capacity until the driver confirms it gone.
	Admitted bool `json:"admitted,omitempty"`
	// GPUs are the machine's GPUs admission gave the node (a local node of a GPU size); it
	// holds them, for itself alone, until the driver confirms it gone.
	GPUs []string `json:"gpus,omitempty"`
	// Preempting is set while a preempted node's driver node is being terminated.
	Preempting bool      `json:"preempting,omitempty"`
	CreatedOn  time.Time `json:"created_on"`
	IdleSince  time.Time `json:"idle_since,omitempty"`
	// Released is set when the engine decided to release the node; the record goes once
	// the driver confirms the node is gone.
	Released bool `json:"released,omitempty"`
	// ReleasedAt is when the engine decided to release the node.
	ReleasedAt time.Time `json:"released_at,omitempty"`
	Error      string    `json:"error,omitempty"`
	// Reason is why a node the driver created is not ready yet (preparing until NodeReady).
	Reason string `json:"reason,omitempty"`
}

func (n Node) Key() string { return n.Compute + "/" + n.ID }

func (n Node) API() api.Node {
	out := api.Node{ID: n.ID, State: n.State, JobID: n.JobID, CreatedOn: n.CreatedOn, GPUs: n.GPUs}
	if n.State == api.NodeIdle {
		out.IdleSince = n.IdleSince
	}
	if n.State == api.NodePreparing {
		out.Reason = n.Reason
	}
	return out
}

// MarkReleased records the decision to release the node at now: it is leaving, and its
// record goes once the driver confirms it gone.
func (n *Node) MarkReleased(now time.Time) {
	n.Released, n.State, n.ReleasedAt = true, api.NodeLeaving, now
}
