package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// BenchmarkCreateCompute measures creating one more cluster in a workspace that already
// holds 1,000 or 10,000 (make bench prints both): with the quota index the cost should not
// follow the number of computes.
func BenchmarkCreateCompute(b *testing.B) {
	for _, existing := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("computes=%d", existing), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "state.db")
			st, err := store.Open(path, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			ws := api.Workspace{Name: "bench", Location: api.DefaultLocation, Quotas: map[string]int64{"standardDSv2Family": 1 << 40}}
			// The existing computes go in with one transaction, as records: creating them
			// through the API would time the set-up's fsyncs, not the engine.
			err = st.Update(func(tx *store.Tx) error {
				if err := tx.Put(store.Workspaces, ws.Name, ws); err != nil {
					return err
				}
				for i := range existing {
					rec := model.Compute{Workspace: ws.Name, Name: fmt.Sprintf("c%05d", i), Type: api.TypeComputeCluster,
						VMSize: "Standard_DS3_v2", VMPriority: api.PriorityDedicated,
						ScaleSettings: &api.ScaleSettings{MaxNodeCount: 4, ScaleDownNodesAfterIdleDuration: "PT120S"}}
					if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			e, err := New(Config{Store: st, Clock: clk, Driver: fake.New(clk), DataDir: b.TempDir(), Manual: true})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := e.Start(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				spec := api.ComputeSpec{Name: fmt.Sprintf("new%07d", i), VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 4}}
				if _, err := e.CreateCompute(ctx, ws.Name, spec, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
