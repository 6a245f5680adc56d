// Package runtimetest drives a manual work loop (runtime.Config.Manual) on a fake clock in
// tests: the controllers' harnesses (computestest, endpointstest) embed Manual.
package runtimetest

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
)

// Manual is a manual loop and the fake clock its timers run on.
type Manual struct {
	T     testing.TB
	Clock *clocktesting.FakeClock
	Loop  *runtime.Loop
}

// Settle runs the loop's pending work (passes, driver calls, events, due timers) until none
// is left, and fails the test when it never ends.
func (m *Manual) Settle() {
	m.T.Helper()
	if err := m.Loop.Settle(context.Background()); err != nil {
		m.T.Fatal(err)
	}
}

// Step moves the fake clock on by d and settles the loop.
func (m *Manual) Step(d time.Duration) {
	m.T.Helper()
	m.Clock.Step(d)
	m.Settle()
}
