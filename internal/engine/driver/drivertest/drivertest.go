//go:build unix

// Package drivertest is the conformance suite of node drivers: Run checks that a
// driver.Driver keeps the contract of package driver, the same way for every driver. A
// driver runs it by adding one test file that builds a Harness:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, drivertest.Harness{
//			New:      func(t *testing.T) driver.Driver { return newDriver(t) },
//			KillNode: func(t *testing.T, d driver.Driver, key string) { ... },
//		})
//	}
//
// The zero Harness asks for the whole contract; each field that relaxes it says so, and
// the checks a driver is excused from still check what it promises instead (a driver
// without sessions must refuse them with ErrPermanent; one that lists no nodes must list
// none).
//
// Tasks are Programs rendered as POSIX sh command lines, so a driver that runs processes
// needs nothing more; a driver that runs none (the fake) acts them out with Decode.
//
// Nothing here sleeps to see that nothing happened: every check reads a state or waits
// for an event the driver owes. A wait is bounded in real time only so that a broken
// driver fails instead of hanging.
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// DefaultWaitLimit bounds each wait for an event and each call when Harness.WaitLimit is 0.
const DefaultWaitLimit = 30 * time.Second

// Harness builds drivers for Run and says what they can do.
type Harness struct {
	// New returns a fresh driver with no nodes. It registers its own cleanup (closing the
	// driver, removing what it made); the suite terminates the nodes it created first.
	New func(t *testing.T) driver.Driver

	// Record, when set, is called with a node's spec before Create, as the engine
	// persists a node before it creates it (the ssh harness maps the key to its test
	// host). Keys the suite uses as unknown are never recorded.
	Record func(t *testing.T, spec driver.NodeSpec)

	// CreatePending says Create returns nodes that are not ready yet (a queued
	// allocation); MakeReady then makes one ready from outside, and the driver must
	// report it with NodeReady and Describe. Without it Create must return ready nodes.
	CreatePending bool
	MakeReady     func(t *testing.T, d driver.Driver, key string)

	// KillNode makes a node die from outside the driver (its process killed, its
	// allocation ended); the driver must report NodeGone. Set NoNodeGone instead for a
	// driver that never reports NodeGone (an attached machine).
	KillNode   func(t *testing.T, d driver.Driver, key string)
	NoNodeGone bool

	// NoExec says the driver offers no sessions: Exec must fail with ErrPermanent.
	NoExec bool

	// FixedTaskPort says TaskPort answers one port for every task of a node (a pod,
	// whose network namespace is its own and whose one port user at a time is the
	// engine's task): asked again while a task holds it, it must give that port again,
	// which is free once the holder ended. Without it a port a task holds is never the
	// answer.
	FixedTaskPort bool

	// NoList says List never returns nodes (nothing the driver reaches is ever an
	// orphan): it must return none, without an error.
	NoList bool

	// WaitLimit bounds each wait for an event and each call (default DefaultWaitLimit).
	WaitLimit time.Duration
}

// Run runs the suite as subtests of t, each on a fresh driver from h.New.
func Run(t *testing.T, h Harness) {
	t.Helper()
	switch {
	case h.New == nil:
		t.Fatal("drivertest: Harness.New is required")
	case h.CreatePending && h.MakeReady == nil:
		t.Fatal("drivertest: Harness.CreatePending needs MakeReady")
	case h.KillNode == nil && !h.NoNodeGone:
		t.Fatal("drivertest: set Harness.KillNode, or NoNodeGone for a driver that never reports NodeGone")
	}
	if h.WaitLimit <= 0 {
		h.WaitLimit = DefaultWaitLimit
	}
	s := &suite{h: h, run: randomHex(3)}
	for _, c := range []struct {
		name string
		f    func(*env)
	}{
		{"CreateIsIdempotent", s.createIsIdempotent},
		{"ConcurrentCreatesMakeOneNode", s.concurrentCreatesMakeOneNode},
		{"Readiness", s.readiness},
		{"ListFindsExactlyTheOwnersNodes", s.listByOwner},
		{"TerminateIsIdempotentAndConfirmed", s.terminate},
		{"StartTaskIsIdempotent", s.startTaskIsIdempotent},
		{"TaskStatusAndExitCodes", s.taskStatusAndExitCodes},
		{"TaskOutputFromOffset", s.taskOutputFromOffset},
		{"KillTask", s.killTask},
		{"Exec", s.exec},
		{"NodeGone", s.nodeGone},
		{"UnknownIsNotFound", s.unknownIsNotFound},
		{"InputsAndOutputs", s.inputsAndOutputs},
		{"OutputSocketRefused", s.outputSocketRefused},
		{"TaskPort", s.taskPort},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(s.env(t)) })
	}
}

// suite is one Run: its keys are unique to it, since some drivers keep what a node leaves
// (an attached machine keeps its tasks' directories) and several runs may share one.
type suite struct {
	h   Harness
	run string
	n   atomic.Int64
}

// key returns a node, task or owner name unique to this run.
func (s *suite) key(kind string) string {
	return fmt.Sprintf("dt%s-%s%d", s.run, kind, s.n.Add(1))
}

// env is one subtest: a fresh driver and the events it delivered that no wait took yet.
type env struct {
	t   *testing.T
	s   *suite
	d   driver.Driver
	ctx context.Context

	mu     sync.Mutex
	unread []driver.Event
}

func (s *suite) env(t *testing.T) *env {
	d := s.h.New(t)
	if d == nil {
		t.Fatal("drivertest: Harness.New returned nil")
	}
	// Calls may take a while (a remote kill has a grace period) but never forever.
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.h.WaitLimit)
	t.Cleanup(cancel)
	return &env{t: t, s: s, d: d, ctx: ctx}
}

// spec returns a new node's spec.
func (e *env) spec(owner string) driver.NodeSpec {
	return driver.NodeSpec{Key: e.s.key("n"), Owner: owner, VMSize: "Standard_DS3_v2", VCPUs: 4, MemoryGB: 14}
}

// create records and creates a node, checks what Create returned, and terminates the node
// when the test ends.
func (e *env) create(spec driver.NodeSpec) driver.NodeInfo {
	e.t.Helper()
	if e.s.h.Record != nil {
		e.s.h.Record(e.t, spec)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*e.s.h.WaitLimit)
		defer cancel()
		if err := e.d.Terminate(ctx, spec.Key); err != nil {
			e.t.Errorf("cleanup: terminating %s: %v", spec.Key, err)
		}
	})
	info, err := e.d.Create(e.ctx, spec)
	if err != nil {
		e.t.Fatalf("Create(%s): %v", spec.Key, err)
	}
	e.checkCreated(spec, info)
	return info
}

func (e *env) checkCreated(spec driver.NodeSpec, info driver.NodeInfo) {
	e.t.Helper()
	if info.Key != spec.Key || info.Owner != spec.Owner {
		e.t.Fatalf("Create(%s, owner %q) returned key %q, owner %q", spec.Key, spec.Owner, info.Key, info.Owner)
	}
	if info.Address == "" {
		e.t.Fatalf("Create(%s) returned no address", spec.Key)
	}
	switch {
	case !e.s.h.CreatePending && !info.Ready:
		e.t.Fatalf("Create(%s) returned a node that is not ready (reason %q); a driver whose nodes wait sets Harness.CreatePending", spec.Key, info.Reason)
	case info.Ready && info.Reason != "":
		e.t.Fatalf("Create(%s) returned a ready node with a pending reason %q", spec.Key, info.Reason)
	}
}

// readyNode creates a node of owner and, when it is pending, makes it ready and waits for
// its NodeReady. It returns the node's key.
func (e *env) readyNode(owner string) string {
	e.t.Helper()
	info := e.create(e.spec(owner))
	if !info.Ready {
		e.s.h.MakeReady(e.t, e.d, info.Key)
		e.waitEvent("NodeReady of "+info.Key, func(ev driver.Event) bool {
			return ev.Kind == driver.NodeReady && ev.NodeKey == info.Key
		})
	}
	return info.Key
}

// waitEvent returns the first event, read before or now, that match accepts; events it
// does not accept stay for later waits. It fails the test after WaitLimit.
func (e *env) waitEvent(what string, match func(driver.Event) bool) driver.Event {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, ev := range e.unread {
		if match(ev) {
			e.unread = slices.Delete(e.unread, i, i+1)
			return ev
		}
	}
	timer := time.NewTimer(e.s.h.WaitLimit)
	defer timer.Stop()
	for {
		select {
		case ev := <-e.d.Events():
			if match(ev) {
				return ev
			}
			e.unread = append(e.unread, ev)
		case <-timer.C:
			e.t.Fatalf("no %s within %s; other events: %s", what, e.s.h.WaitLimit, formatEvents(e.unread))
		}
	}
}

// waitExit waits for a task's TaskExited and returns its exit code.
func (e *env) waitExit(node, task string) int {
	e.t.Helper()
	ev := e.waitEvent("TaskExited of "+node+"/"+task, func(ev driver.Event) bool {
		return ev.Kind == driver.TaskExited && ev.NodeKey == node && ev.TaskKey == task
	})
	return ev.ExitCode
}

// start starts a task running p and returns its key.
func (e *env) start(node string, p Program) string {
	e.t.Helper()
	task := e.s.key("t")
	if err := e.d.StartTask(e.ctx, node, driver.TaskSpec{Key: task, Command: p.Command()}); err != nil {
		e.t.Fatalf("StartTask(%s, %s): %v", node, task, err)
	}
	return task
}

// waitOutput waits until a task's output holds want; a task that ended without it fails
// the test. Output has no event, so it is read again after a short pause.
func (e *env) waitOutput(node, task, want string) {
	e.t.Helper()
	deadline := time.Now().Add(e.s.h.WaitLimit)
	for {
		out := e.output(node, task, 0)
		if strings.Contains(out, want) {
			return
		}
		if st := e.status(node, task); !st.Running {
			e.t.Fatalf("task %s ended (exit %d) without printing %q; it printed %q", task, st.ExitCode, want, out)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("task %s did not print %q within %s; it printed %q", task, want, e.s.h.WaitLimit, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) taskPort(node string) int {
	e.t.Helper()
	port, err := e.d.TaskPort(e.ctx, node)
	if err != nil {
		e.t.Fatalf("TaskPort(%s): %v", node, err)
	}
	if port <= 0 || port > 65535 {
		e.t.Fatalf("TaskPort(%s) = %d, not a TCP port", node, port)
	}
	return port
}

func (e *env) status(node, task string) driver.TaskStatus {
	e.t.Helper()
	st, err := e.d.TaskStatus(e.ctx, node, task)
	if err != nil {
		e.t.Fatalf("TaskStatus(%s, %s): %v", node, task, err)
	}
	return st
}

func (e *env) output(node, task string, offset int64) string {
	e.t.Helper()
	out, err := e.d.TaskOutput(e.ctx, node, task, offset)
	if err != nil {
		e.t.Fatalf("TaskOutput(%s, %s, %d): %v", node, task, offset, err)
	}
	return string(out)
}

// listKeys lists owner's nodes and returns their keys, sorted.
func (e *env) listKeys(owner string) []string {
	e.t.Helper()
	nodes, err := e.d.List(e.ctx, owner)
	if err != nil {
		e.t.Fatalf("List(%q): %v", owner, err)
	}
	keys := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if owner != "" && n.Owner != owner {
			e.t.Fatalf("List(%q) returned %s of owner %q", owner, n.Key, n.Owner)
		}
		keys = append(keys, n.Key)
	}
	slices.Sort(keys)
	return keys
}

func (e *env) expectList(owner string, want ...string) {
	e.t.Helper()
	if e.s.h.NoList {
		want = nil
	}
	slices.Sort(want)
	if got := e.listKeys(owner); !slices.Equal(got, want) {
		e.t.Fatalf("List(%q) = %v, want %v", owner, got, want)
	}
}

func (e *env) expectNotFound(what string, err error) {
	e.t.Helper()
	if !driver.IsNotFound(err) {
		e.t.Fatalf("%s: %v, want an error that is driver.ErrNotFound", what, err)
	}
}

func (e *env) expectGone(node string) {
	e.t.Helper()
	_, err := e.d.Describe(e.ctx, node)
	e.expectNotFound("Describe("+node+") of a gone node", err)
}

func formatEvents(evs []driver.Event) string {
	if len(evs) == 0 {
		return "none"
	}
	parts := make([]string, len(evs))
	for i, ev := range evs {
		parts[i] = fmt.Sprintf("%s %s/%s exit %d", ev.Kind, ev.NodeKey, ev.TaskKey, ev.ExitCode)
	}
	return strings.Join(parts, "; ")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
