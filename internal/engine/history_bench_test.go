package engine

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// BenchmarkHistorySample measures one sample of the status page's history (every 10 s in a
// running engine) of a workspace of 100 computes with 1,000 queued jobs, and 10,000 or
// 100,000 ended ones: the sample reads the active-jobs index, so the ended jobs should not
// show in its cost.
func BenchmarkHistorySample(b *testing.B) {
	for _, ended := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("ended=%d", ended), func(b *testing.B) {
			st := benchStore(b)
			clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			ws := api.Workspace{Name: "bench", Location: api.DefaultLocation}
			err := st.Update(func(tx *store.Tx) error {
				if err := tx.Put(store.Workspaces, ws.Name, ws); err != nil {
					return err
				}
				for i := range 100 {
					rec := model.Compute{Workspace: ws.Name, Name: fmt.Sprintf("c%03d", i), Type: api.TypeComputeCluster,
						VMSize: "Standard_DS3_v2", VMPriority: api.PriorityDedicated, ScaleSettings: &api.ScaleSettings{MaxNodeCount: 4}}
					if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
						return err
					}
				}
				for i := range 1000 + ended {
					status := api.JobQueued
					if i >= 1000 {
						status = api.JobCompleted
					}
					compute := fmt.Sprintf("c%03d", i%100)
					j := model.Job{Job: api.Job{ID: fmt.Sprintf("job-%07d", i), Workspace: ws.Name, Compute: compute, Status: status,
						Command: []string{"true"}, Count: 1}, ComputeKey: ws.Name + "/" + compute}
					if err := model.PutJob(tx, j); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			e, ctx := benchEngine(b, st, clk, true)
			b.ResetTimer()
			for range b.N {
				if err := e.SampleHistory(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			h, err := e.History(ctx, ws.Name)
			if err != nil {
				b.Fatal(err)
			}
			if len(h.Computes) != 100 || h.Computes[0].Points[0].JobsQueued != 10 {
				b.Fatalf("history %d computes, first %+v; want 100 with 10 queued jobs each", len(h.Computes), h.Computes[0].Points[0])
			}
		})
	}
}
