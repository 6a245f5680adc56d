package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// BenchmarkCreateCompute measures creating one more cluster in a workspace that already
// holds 1,000 or 10,000 (make bench prints both): with the quota index the cost should not
// follow the number of computes.
func BenchmarkCreateCompute(b *testing.B) {
	for _, existing := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("computes=%d", existing), func(b *testing.B) {
			st := benchStore(b)
			clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			ws := api.Workspace{Name: "bench", Location: api.DefaultLocation, Quotas: map[string]int64{"standardDSv2Family": 1 << 40}}
			// The existing computes go in with one transaction, as records: creating them
			// through the API would time the set-up's fsyncs, not the engine.
			err := st.Update(func(tx *store.Tx) error {
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
			e, ctx := benchEngine(b, st, clk, true)
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

// BenchmarkCreateDeleteConcurrent creates and deletes clusters at zero nodes through the
// engine on a real store (fsync and all), from one caller and from ten at once, as a
// terraform apply and destroy do (parallelism 10). An op is one create and one delete. The
// API's writes share commits while they wait for their turn, so ten callers should take
// well under the time per op of one; when every write queues a commit of its own, they
// take about the same.
func BenchmarkCreateDeleteConcurrent(b *testing.B) {
	for _, callers := range []int{1, 10} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			e, ctx := benchEngine(b, benchStore(b), clock.RealClock{}, false)
			ws := api.WorkspaceSpec{Name: "bench", Location: api.DefaultLocation, Quotas: map[string]int64{"standardDSv2Family": 1 << 40}}
			if _, err := e.CreateWorkspace(ctx, ws, ""); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			b.ResetTimer()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						name := fmt.Sprintf("c%07d", i)
						spec := api.ComputeSpec{Name: name, VMSize: "Standard_DS1_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}
						if _, err := e.CreateCompute(ctx, ws.Name, spec, ""); err != nil {
							errs <- err
							return
						}
						if err := e.DeleteCompute(ctx, ws.Name, name); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}

// benchStore opens a store on disk (fsync and all) for a benchmark.
func benchStore(b *testing.B) *store.Store {
	b.Helper()
	st := storetest.Open(b, b.TempDir())
	return st
}

// benchEngine starts an engine on st with the fake driver, in manual mode or running; it
// stops when the benchmark ends.
func benchEngine(b *testing.B, st *store.Store, clk clock.WithTicker, manual bool) (*Engine, context.Context) {
	b.Helper()
	e, err := New(Config{Store: st, Clock: clk, Driver: fake.New(clk), DataDir: b.TempDir(), Manual: manual})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	return e, ctx
}
