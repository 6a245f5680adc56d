//go:build unix

package drivertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// The checks of Run, one per subtest, in the order Run lists them.

// Create is idempotent under the key: the second call returns the same node and List
// holds it once.
func (s *suite) createIsIdempotent(e *env) {
	owner := s.key("owner")
	spec := e.spec(owner)
	a := e.create(spec)
	b, err := e.d.Create(e.ctx, spec)
	if err != nil {
		e.t.Fatalf("second Create(%s): %v", spec.Key, err)
	}
	e.checkCreated(spec, b)
	if a.Address != b.Address || (a.Ready && !b.Ready) {
		e.t.Fatalf("second Create returned another node: %+v, then %+v", a, b)
	}
	e.expectList(owner, spec.Key)
}

// Creates that race under one key make one node.
func (s *suite) concurrentCreatesMakeOneNode(e *env) {
	owner := s.key("owner")
	spec := e.spec(owner)
	if s.h.Record != nil {
		s.h.Record(e.t, spec)
	}
	e.t.Cleanup(func() { _ = e.d.Terminate(context.Background(), spec.Key) })
	const n = 4
	infos := make([]driver.NodeInfo, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { infos[i], errs[i] = e.d.Create(e.ctx, spec) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			e.t.Fatalf("Create %d of %d: %v", i+1, n, errs[i])
		}
		e.checkCreated(spec, infos[i])
		if infos[i].Address != infos[0].Address {
			e.t.Fatalf("racing Creates returned different nodes: %+v and %+v", infos[0], infos[i])
		}
	}
	e.expectList(owner, spec.Key)
	e.expectList("", spec.Key)
}

// Create says whether the node is ready; Describe says so too, and a pending node that
// becomes ready is reported by NodeReady.
func (s *suite) readiness(e *env) {
	spec := e.spec(s.key("owner"))
	info := e.create(spec)
	described, err := e.d.Describe(e.ctx, spec.Key)
	if err != nil {
		e.t.Fatalf("Describe(%s): %v", spec.Key, err)
	}
	if described.Key != spec.Key {
		e.t.Fatalf("Describe(%s) returned key %q", spec.Key, described.Key)
	}
	if !s.h.CreatePending {
		if !described.Ready {
			e.t.Fatalf("Describe(%s) says a node Create returned ready is not ready (%q)", spec.Key, described.Reason)
		}
		return
	}
	if info.Ready || described.Ready {
		e.t.Fatalf("a pending driver's node is ready at once: Create %+v, Describe %+v", info, described)
	}
	err = e.d.StartTask(e.ctx, spec.Key, driver.TaskSpec{Key: s.key("t"), Command: Program{}.Command()})
	if !driver.IsTransient(err) {
		e.t.Fatalf("StartTask on a pending node: %v, want an error that is driver.ErrTransient", err)
	}
	if _, err := e.d.TaskPort(e.ctx, spec.Key); !driver.IsTransient(err) {
		e.t.Fatalf("TaskPort on a pending node: %v, want an error that is driver.ErrTransient", err)
	}
	s.h.MakeReady(e.t, e.d, spec.Key)
	e.waitEvent("NodeReady of "+spec.Key, func(ev driver.Event) bool {
		return ev.Kind == driver.NodeReady && ev.NodeKey == spec.Key
	})
	if described, err = e.d.Describe(e.ctx, spec.Key); err != nil || !described.Ready || described.Reason != "" {
		e.t.Fatalf("Describe(%s) after NodeReady: %+v, %v; want ready", spec.Key, described, err)
	}
	again, err := e.d.Create(e.ctx, spec)
	if err != nil || !again.Ready {
		e.t.Fatalf("Create(%s) of a ready node: %+v, %v; want it, ready", spec.Key, again, err)
	}
	task := e.start(spec.Key, Program{ExitCode: 0})
	if code := e.waitExit(spec.Key, task); code != 0 {
		e.t.Fatalf("a task on the now ready node exited %d, want 0", code)
	}
}

// List by owner finds exactly the owner's nodes, which is how the engine finds orphans;
// a terminated node is no longer listed.
func (s *suite) listByOwner(e *env) {
	ownerA, ownerB := s.key("owner"), s.key("owner")
	a1, a2, b1 := e.create(e.spec(ownerA)), e.create(e.spec(ownerA)), e.create(e.spec(ownerB))
	e.expectList(ownerA, a1.Key, a2.Key)
	e.expectList(ownerB, b1.Key)
	e.expectList(s.key("owner"))
	if !s.h.NoList {
		all := e.listKeys("")
		for _, k := range []string{a1.Key, a2.Key, b1.Key} {
			if !slices.Contains(all, k) {
				e.t.Fatalf("List(\"\") = %v, missing %s", all, k)
			}
		}
	}
	if err := e.d.Terminate(e.ctx, a1.Key); err != nil {
		e.t.Fatalf("Terminate(%s): %v", a1.Key, err)
	}
	e.expectList(ownerA, a2.Key)
}

// Terminate returns once the node is gone (Describe says not found, its tasks with it)
// and is idempotent; terminating a node never created returns nil.
func (s *suite) terminate(e *env) {
	node := e.readyNode(s.key("owner"))
	task := e.start(node, Program{Block: true})
	if err := e.d.Terminate(e.ctx, node); err != nil {
		e.t.Fatalf("Terminate(%s): %v", node, err)
	}
	e.expectGone(node)
	_, err := e.d.TaskStatus(e.ctx, node, task)
	e.expectNotFound("TaskStatus of a task of a terminated node", err)
	if err := e.d.Terminate(e.ctx, node); err != nil {
		e.t.Fatalf("Terminate(%s) again: %v, want nil", node, err)
	}
	if err := e.d.Terminate(e.ctx, s.key("n")); err != nil {
		e.t.Fatalf("Terminate of a node never created: %v, want nil", err)
	}
}

// StartTask is idempotent under the task key: of racing starts one runs, and a start of
// an ended task does not run it again. The starts differ in their command, so the output
// shows which one ran and that nothing ran twice.
func (s *suite) startTaskIsIdempotent(e *env) {
	node := e.readyNode(s.key("owner"))
	task := s.key("t")
	spec := func(output string, code int) driver.TaskSpec {
		return driver.TaskSpec{Key: task, Command: Program{Output: output, ExitCode: code}.Command(), Env: map[string]string{"DT_TASK": task}}
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = e.d.StartTask(e.ctx, node, spec(fmt.Sprintf("run %d\n", i), 7)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			e.t.Fatalf("StartTask %d of %d: %v", i+1, len(errs), err)
		}
	}
	if code := e.waitExit(node, task); code != 7 {
		e.t.Fatalf("exit code %d, want 7", code)
	}
	first := e.output(node, task, 0)
	if !slices.Contains([]string{"run 0\n", "run 1\n", "run 2\n"}, first) {
		e.t.Fatalf("output of racing starts %q, want the output of exactly one", first)
	}
	if err := e.d.StartTask(e.ctx, node, spec("again\n", 8)); err != nil {
		e.t.Fatalf("StartTask of an ended task: %v, want nil", err)
	}
	if st := e.status(node, task); st.Running || st.ExitCode != 7 {
		e.t.Fatalf("status after starting an ended task again: %+v, want ended with 7 (not restarted)", st)
	}
	if out := e.output(node, task, 0); out != first {
		e.t.Fatalf("output after starting an ended task again %q, want %q: it ran again", out, first)
	}
}

// TaskStatus says running while a task runs and gives its exit code once it ended, the
// same code TaskExited carries.
func (s *suite) taskStatusAndExitCodes(e *env) {
	node := e.readyNode(s.key("owner"))
	running := e.start(node, Program{Block: true})
	zero := e.start(node, Program{ExitCode: 0})
	three := e.start(node, Program{ExitCode: 3})
	for task, want := range map[string]int{zero: 0, three: 3} {
		if code := e.waitExit(node, task); code != want {
			e.t.Fatalf("TaskExited of %s: exit code %d, want %d", task, code, want)
		}
		if st := e.status(node, task); st.Running || st.ExitCode != want {
			e.t.Fatalf("TaskStatus of %s: %+v, want ended with %d", task, st, want)
		}
	}
	if st := e.status(node, running); !st.Running {
		e.t.Fatalf("TaskStatus of a running task: %+v, want running", st)
	}
}

// TaskOutput reads from an offset, and stays readable after the task ended.
func (s *suite) taskOutputFromOffset(e *env) {
	node := e.readyNode(s.key("owner"))
	const text = "hello\nworld\n"
	task := e.start(node, Program{Output: text})
	e.waitExit(node, task)
	for _, c := range []struct {
		offset int64
		want   string
	}{{0, text}, {6, "world\n"}, {int64(len(text)) - 1, "\n"}, {int64(len(text)), ""}} {
		if got := e.output(node, task, c.offset); got != c.want {
			e.t.Fatalf("TaskOutput from %d = %q, want %q", c.offset, got, c.want)
		}
	}
}

// KillTask ends a running task as killed by a signal, and leaves an ended task as it was.
func (s *suite) killTask(e *env) {
	node := e.readyNode(s.key("owner"))
	task := e.start(node, Program{Block: true})
	if st := e.status(node, task); !st.Running {
		e.t.Fatalf("status before the kill: %+v, want running", st)
	}
	if err := e.d.KillTask(e.ctx, node, task); err != nil {
		e.t.Fatalf("KillTask of a running task: %v", err)
	}
	code := e.waitExit(node, task)
	if code <= 128 {
		e.t.Fatalf("a killed task exited %d, want 128 + a signal", code)
	}
	if st := e.status(node, task); st.Running || st.ExitCode != code {
		e.t.Fatalf("status of the killed task: %+v, want ended with %d", st, code)
	}
	if err := e.d.KillTask(e.ctx, node, task); err != nil {
		e.t.Fatalf("KillTask of a killed task: %v, want nil", err)
	}
	ended := e.start(node, Program{ExitCode: 3})
	e.waitExit(node, ended)
	if err := e.d.KillTask(e.ctx, node, ended); err != nil {
		e.t.Fatalf("KillTask of an ended task: %v, want nil", err)
	}
	if st := e.status(node, ended); st.Running || st.ExitCode != 3 {
		e.t.Fatalf("status of an ended task after KillTask: %+v, want ended with 3", st)
	}
}

// Exec feeds stdin, collects output and returns the exit status; a driver without
// sessions refuses them as permanent.
func (s *suite) exec(e *env) {
	node := e.readyNode(s.key("owner"))
	var out bytes.Buffer
	spec := driver.ExecSpec{
		Command: Program{Output: "echo:", Stdin: true, ExitCode: 3}.Command(),
		Stdin:   strings.NewReader("ping\n"),
		Output:  &out,
	}
	code, err := e.d.Exec(e.ctx, node, spec)
	if s.h.NoExec {
		if !driver.IsPermanent(err) {
			e.t.Fatalf("Exec on a driver without sessions: %d, %v; want an error that is driver.ErrPermanent", code, err)
		}
		return
	}
	if err != nil {
		e.t.Fatalf("Exec: %v", err)
	}
	if code != 3 || out.String() != "echo:ping\n" {
		e.t.Fatalf("Exec returned %d with output %q, want 3 with %q", code, out.String(), "echo:ping\n")
	}
	_, err = e.d.Exec(e.ctx, s.key("n"), driver.ExecSpec{Command: Program{}.Command(), Stdin: strings.NewReader(""), Output: &out})
	e.expectNotFound("Exec on an unknown node", err)
}

// A node that dies from outside (or whose allocation ends by itself) is NodeGone, and
// gone for Describe; terminating it then returns nil.
func (s *suite) nodeGone(e *env) {
	if s.h.KillNode == nil {
		e.t.Skip("the driver never reports NodeGone (Harness.NoNodeGone)")
	}
	nodes := []string{e.readyNode(s.key("owner"))}
	e.start(nodes[0], Program{Block: true})
	if s.h.CreatePending {
		nodes = append(nodes, e.create(e.spec(s.key("owner"))).Key) // ends before it is ready
	}
	for _, node := range nodes {
		s.h.KillNode(e.t, e.d, node)
		e.waitEvent("NodeGone of "+node, func(ev driver.Event) bool {
			return ev.Kind == driver.NodeGone && ev.NodeKey == node
		})
		e.expectGone(node)
		if err := e.d.Terminate(e.ctx, node); err != nil {
			e.t.Fatalf("Terminate of a node that died: %v, want nil", err)
		}
	}
}

// Unknown nodes and tasks are ErrNotFound for every call that names them.
func (s *suite) unknownIsNotFound(e *env) {
	unknown := s.key("n")
	_, err := e.d.Describe(e.ctx, unknown)
	e.expectNotFound("Describe of an unknown node", err)
	err = e.d.StartTask(e.ctx, unknown, driver.TaskSpec{Key: s.key("t"), Command: Program{}.Command()})
	e.expectNotFound("StartTask on an unknown node", err)
	_, err = e.d.TaskStatus(e.ctx, unknown, s.key("t"))
	e.expectNotFound("TaskStatus on an unknown node", err)
	_, err = e.d.TaskOutput(e.ctx, unknown, s.key("t"), 0)
	e.expectNotFound("TaskOutput on an unknown node", err)
	err = e.d.KillTask(e.ctx, unknown, s.key("t"))
	e.expectNotFound("KillTask on an unknown node", err)

	node := e.readyNode(s.key("owner"))
	task := s.key("t")
	_, err = e.d.TaskStatus(e.ctx, node, task)
	e.expectNotFound("TaskStatus of an unknown task", err)
	_, err = e.d.TaskOutput(e.ctx, node, task, 0)
	e.expectNotFound("TaskOutput of an unknown task", err)
	err = e.d.KillTask(e.ctx, node, task)
	e.expectNotFound("KillTask of an unknown task", err)
}

// TaskPort gives a port free on the node: a task started there listens on it. Asked again
// while a task of the node holds that port, it gives another (or, FixedTaskPort, the same
// one, free again once its holder ended). A task that listens on a port held fails, so the
// listening checked here is real. An unknown node is ErrNotFound.
func (s *suite) taskPort(e *env) {
	node := e.readyNode(s.key("owner"))
	first := e.taskPort(node)
	holder := e.start(node, Program{Listen: first, Block: true})
	e.waitOutput(node, holder, ListeningMarker)
	if code := e.waitExit(node, e.start(node, Program{Listen: first})); code != 6 {
		e.t.Fatalf("a task listening on port %d, which another task of the node holds, exited %d, want 6", first, code)
	}
	second := e.taskPort(node)
	switch {
	case s.h.FixedTaskPort && second != first:
		e.t.Fatalf("TaskPort of a driver with one port per node (Harness.FixedTaskPort) gave %d, then %d", first, second)
	case s.h.FixedTaskPort:
		if err := e.d.KillTask(e.ctx, node, holder); err != nil {
			e.t.Fatalf("KillTask(%s): %v", holder, err)
		}
		e.waitExit(node, holder)
	case second == first:
		e.t.Fatalf("TaskPort gave port %d again while a task of the node listens on it", first)
	}
	task := e.start(node, Program{Listen: second})
	if code := e.waitExit(node, task); code != 0 {
		e.t.Fatalf("a task could not listen on port %d, which TaskPort gave: exit %d, output %q", second, code, e.output(node, task, 0))
	}
	_, err := e.d.TaskPort(e.ctx, s.key("n"))
	e.expectNotFound("TaskPort on an unknown node", err)
}
