package model

import (
	"time"

	"io"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
)

// Idempotency remembers which object a create call with a given key made.
type Idempotency struct {
	ID string `json:"id"`
	// At is when the create was made; records older than IdempotencyTTL are pruned when
	// the engine starts (records from before this field have none and are pruned too).
	At time.Time `json:"at,omitzero"`
}

func NotFoundWorkspace(name string) error {
	return api.Errorf(api.CodeNotFound, "", "workspace %q not found", name)
}

func WorkspaceOf(computeKey string) string {
	ws, _, _ := strings.Cut(computeKey, "/")
	return ws
}

// SnapshotStore keeps uploaded code snapshots, content-addressed.
type SnapshotStore interface {
	Put(r io.Reader) (id string, err error)
	Path(id string) (string, error)
	// IDs lists the stored snapshots (for a backup).
	IDs() ([]string, error)
}

// EffectiveQuota is a family's vCPU limit in a workspace: the workspace's own quota when it
// sets one, else the catalog default (0 for families that require approval).
func EffectiveQuota(ws *api.Workspace, family string) int64 {
	if q, ok := ws.Quotas[family]; ok {
		return q
	}
	if f, ok := catalog.LookupFamily(family); ok {
		return f.DefaultQuota
	}
	return 0
}
