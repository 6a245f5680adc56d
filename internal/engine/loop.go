package engine

import (
	"context"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/mux"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
)

// The engine's use of the work loop: which handler reconciles which kind of object, what a
// fired timer does, and the typed timers the controllers set.

func (e *Engine) newLoop() *runtime.Loop {
	l := runtime.New(runtime.Config{Clock: e.clock, Manual: e.manual, OnTimer: e.onTimer})
	l.Handle(runtime.Compute, e.reconcileCompute)
	return l
}

// watchDriver has the loop apply the driver's events, read from each driver's own channel:
// a merged one would hand events over in a goroutine of its own, so a manual engine could
// not drain them deterministically.
func (e *Engine) watchDriver() {
	var events []<-chan driver.Event
	if m, ok := e.driver.(*mux.Driver); ok {
		events = m.Sources()
	} else {
		events = []<-chan driver.Event{e.driver.Events()}
	}
	e.loop.Watch(events, e.onEvent)
}

// onTimer runs a probe when a probe timer fires, and reconciles the timer's object otherwise.
func (e *Engine) onTimer(_ context.Context, t runtime.Timer) {
	if t.Kind == runtime.Probe {
		e.endpoints.RunProbe(t.Object.Name, t.Sub)
		return
	}
	e.loop.Mark(t.Object)
}

// kick marks a compute for a reconcile pass.
func (e *Engine) kick(computeKey string) { e.loop.Mark(runtime.ComputeKey(computeKey)) }

// Settle runs a manual engine's pending work until none is left (see package runtime):
// tests move the fake clock, call Settle, and check. It fails on an engine that is not
// manual or not started.
func (e *Engine) Settle(ctx context.Context) error {
	return e.loop.Settle(ctx)
}

func nodeIdleTimer(n model.Node) runtime.Timer {
	return runtime.Timer{Kind: runtime.NodeIdle, Object: runtime.ComputeKey(n.Compute), Sub: n.ID}
}

func instanceTimer(kind runtime.TimerKind, computeKey string) runtime.Timer {
	return runtime.Timer{Kind: kind, Object: runtime.ComputeKey(computeKey)}
}
