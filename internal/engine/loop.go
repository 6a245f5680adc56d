package engine

import (
	"context"
	"errors"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/mux"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
)

// The engine's use of the work loop: which handler reconciles which kind of object, what a
// fired timer does, and the typed timers the controllers set.

func (e *Engine) newLoop() *runtime.Loop {
	// Each driver's own channel: a merged one would hand events over in a goroutine of its
	// own, so a manual engine could not drain them deterministically.
	var events []<-chan driver.Event
	if m, ok := e.driver.(*mux.Driver); ok {
		events = m.Sources()
	} else {
		events = []<-chan driver.Event{e.driver.Events()}
	}
	l := runtime.New(runtime.Config{
		Clock: e.clock, Manual: e.manual,
		Events: events, OnEvent: e.onEvent,
		OnTimer: e.onTimer,
	})
	l.Handle(runtime.Compute, e.reconcileCompute)
	l.Handle(runtime.Endpoint, e.reconcileEndpoint)
	return l
}

// onTimer runs a probe when a probe timer fires, and reconciles the timer's object otherwise.
func (e *Engine) onTimer(_ context.Context, t runtime.Timer) {
	if t.Kind == runtime.Probe {
		e.runProbe(t.Object.Name, t.Sub)
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
	if e.loop == nil {
		return errNotStarted
	}
	return e.loop.Settle(ctx)
}

// settleManual lets a call that waits for the loop (a delete waiting for its nodes to be
// released) make progress on a manual engine, where nothing runs by itself.
func (e *Engine) settleManual(ctx context.Context) {
	if e.manual && e.loop != nil {
		if err := e.loop.Settle(ctx); err != nil {
			e.log.Error("settling failed", "error", err)
		}
	}
}

var errNotStarted = errors.New("engine not started")

func nodeIdleTimer(n model.Node) runtime.Timer {
	return runtime.Timer{Kind: runtime.NodeIdle, Object: runtime.ComputeKey(n.Compute), Sub: n.ID}
}

func instanceTimer(kind runtime.TimerKind, computeKey string) runtime.Timer {
	return runtime.Timer{Kind: kind, Object: runtime.ComputeKey(computeKey)}
}

func endpointStepTimer(endpointKey, instanceID string) runtime.Timer {
	return runtime.Timer{Kind: runtime.EndpointStep, Object: runtime.EndpointKey(endpointKey), Sub: instanceID}
}

func probeTimer(instanceID, probe string) runtime.Timer {
	return runtime.Timer{Kind: runtime.Probe, Object: runtime.Key{Kind: runtime.EndpointInstance, Name: instanceID}, Sub: probe}
}

// waitDone is what ends a wait for the loop: ctx, or on a manual engine the settle just
// done (nothing else will happen until the next Settle).
func (e *Engine) waitDone(ctx context.Context) <-chan struct{} {
	if e.manual {
		return closedChan
	}
	return ctx.Done()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// gone reports whether a delete waiter's channel is closed, without waiting.
func gone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
