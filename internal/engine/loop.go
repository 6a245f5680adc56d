package engine

import (
	"context"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/mux"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
)

// The engine's use of the work loop: the driver's events and what a fired timer does.

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
	e.loop.Watch(events, e.nodes.HandleEvent)
}

// onTimer runs a probe when a probe timer fires, and reconciles the timer's object otherwise.
func (e *Engine) onTimer(_ context.Context, t runtime.Timer) {
	if t.Kind == runtime.Probe {
		e.endpoints.RunProbe(t.Object.Name, t.Sub)
		return
	}
	e.loop.Mark(t.Object)
}

// Settle runs a manual engine's pending work until none is left (see package runtime):
// tests move the fake clock, call Settle, and check.
func (e *Engine) Settle(ctx context.Context) error { return e.loop.Settle(ctx) }
