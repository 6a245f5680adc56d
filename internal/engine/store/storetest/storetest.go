// Package storetest gives tests a real store in a temporary directory, and the records
// they start from.
package storetest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Open opens a store in dir, closed when the test ends.
func Open(t testing.TB, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// PutWorkspace stores a workspace of the default location with the given quotas (vCPUs
// per family), as the workspaces' controller would.
func PutWorkspace(t testing.TB, st *store.Store, name string, quotas map[string]int64, createdOn time.Time) {
	t.Helper()
	ws := api.Workspace{ID: api.WorkspaceID(name), Name: name, Location: api.DefaultLocation, Quotas: quotas, CreatedOn: createdOn}
	if err := st.Update(func(tx *store.Tx) error { return tx.Put(store.Workspaces, name, ws) }); err != nil {
		t.Fatal(err)
	}
}
