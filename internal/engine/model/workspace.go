package model

import (
	"io"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Idempotency remembers which object a create call with a given key made.
type Idempotency struct {
	ID string `json:"id"`
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
}
