package model

import (
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// Create keys are remembered for IdempotencyTTL, then pruned: a retry within the TTL is
// replayed, and the records do not pile up for the store's lifetime.
func TestPruneIdempotencyForgetsKeysOlderThanTheTTL(t *testing.T) {
	st := storetest.Open(t, t.TempDir())
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	err := st.Update(func(tx *store.Tx) error {
		if err := Remember(tx, "old", "/workspaces/a", t0); err != nil {
			return err
		}
		if err := Remember(tx, "young", "/workspaces/b", t0.Add(2*time.Hour)); err != nil {
			return err
		}
		// A record written before keys had a time.
		return tx.Put(store.Idempotency, "legacy", Idempotency{ID: "/workspaces/c"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var pruned int
	err = st.Update(func(tx *store.Tx) error {
		pruned, err = PruneIdempotency(tx, t0.Add(IdempotencyTTL+time.Hour))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if pruned != 2 {
		t.Errorf("pruned %d keys; want 2 (old and legacy)", pruned)
	}
	err = st.View(func(tx *store.Tx) error {
		if got := tx.Keys(store.Idempotency, ""); len(got) != 1 || got[0] != "young" {
			t.Errorf("keys left: %v; want [young]", got)
		}
		replayed, err := Replayed(tx, "young", "/workspaces/b")
		if err != nil || !replayed {
			t.Errorf("Replayed(young) = %v, %v; want a replay within the TTL", replayed, err)
		}
		replayed, err = Replayed(tx, "old", "/workspaces/a")
		if err != nil || replayed {
			t.Errorf("Replayed(old) = %v, %v; want it forgotten", replayed, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
