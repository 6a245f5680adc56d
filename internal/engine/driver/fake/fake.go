// Package fake is an in-memory driver.Driver for engine tests. It records every call in
// order, can fail the next call of a method with any error (driver.Transient(err),
// driver.ErrNoCapacity, ...), and lets the test make nodes ready, end tasks and kill
// nodes, which emits the Events a real driver would. It never sleeps and never starts a
// goroutine on the common path, so it composes with a fake clock: an event caused by
// MakeReady, FinishTask or KillNode is on the Events channel when the call returns.
//
// By default Create returns nodes that are ready at once, as the local and ssh drivers
// do; Options.CreatePending makes them wait for MakeReady, as a queued allocation on a
// cluster manager does. It passes the drivertest conformance suite both ways.
package fake

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// Name is the fake driver's name.
const Name = "fake"

// Method names as Calls records them and FailNext takes them.
const (
	MethodCreate     = "Create"
	MethodDescribe   = "Describe"
	MethodList       = "List"
	MethodTerminate  = "Terminate"
	MethodStartTask  = "StartTask"
	MethodTaskStatus = "TaskStatus"
	MethodTaskOutput = "TaskOutput"
	MethodKillTask   = "KillTask"
	MethodExec       = "Exec"
	MethodFetch      = "FetchOutput"
	MethodTaskPort   = "TaskPort"
	MethodClose      = "Close"
)

// KilledExitCode is the exit code KillTask records, as for a SIGKILLed process.
const KilledExitCode = 137

// eventBuffer is how many events wait on the channel before the overflow queue is used.
const eventBuffer = 1024

// Call is one recorded call. Key is the node key, "node/task" for task methods, and the
// owner for List.
type Call struct {
	Method string
	Key    string
}

func (c Call) String() string { return c.Method + " " + c.Key }

// Task is a task as the fake holds it.
type Task struct {
	Spec   driver.TaskSpec
	Status driver.TaskStatus
	Output []byte
}

// Outcome is what a new task does at once, as Options.Start decides it.
type Outcome struct {
	// Output is printed at once.
	Output []byte
	// Exited ends the task at once with ExitCode (TaskExited is emitted before StartTask
	// returns); otherwise it runs until FinishTask or KillTask.
	Exited   bool
	ExitCode int
}

// Options configures NewWithOptions. The zero value is New's behaviour.
type Options struct {
	// CreatePending makes Create return nodes that are not ready (Ready false, Reason
	// PendingReason) until MakeReady; StartTask and Exec on them fail with
	// driver.ErrTransient.
	CreatePending bool
	// PendingReason is a pending node's Reason (default "Resources", as squeue says).
	PendingReason string
	// Start, when set, decides what a task does when it starts (once per task key).
	// Without it a task prints nothing and runs until FinishTask or KillTask. It runs
	// under the fake's lock, so it must not call the fake.
	Start func(nodeKey string, spec driver.TaskSpec) Outcome
	// Exec, when set, runs a session in place of the default, which copies stdin to the
	// output and returns 0.
	Exec func(ctx context.Context, nodeKey string, spec driver.ExecSpec) (int, error)
	// Dir, when set, gives each task a real working directory, Dir/<node key>/<task key>
	// (WorkDir returns it): StartTask copies the inputs there and creates the outputs,
	// Start finds it in the spec's Env under driver.WorkDirEnv, and FetchOutput reads it.
	// Without Dir tasks have no files: inputs are recorded but not copied, and
	// FetchOutput fails with driver.ErrPermanent.
	Dir string
	// TaskPort, when set, answers TaskPort on a ready node in place of the default, which
	// hands out FirstTaskPort, FirstTaskPort+1, ... one per call. A test whose instances
	// listen for real on their ports sets LoopbackPort here. It runs under the
	// fake's lock, so it must not call the fake.
	TaskPort func(nodeKey string) (int, error)
}

// FirstTaskPort is the first port the fake's TaskPort hands out by default.
const FirstTaskPort = 20000

// LoopbackPort is an Options.TaskPort for tests whose instances listen for real: a port
// free on this machine's loopback now (driver.LoopbackPort), as the local driver gives.
func LoopbackPort(string) (int, error) { return driver.LoopbackPort() }

type node struct {
	spec  driver.NodeSpec
	info  driver.NodeInfo
	tasks map[string]*Task
}

// Driver is the fake. The zero value is not usable; call New.
type Driver struct {
	clk  clock.PassiveClock
	opts Options

	mu      sync.Mutex
	calls   []Call
	fail    map[string][]error
	nodes   map[string]*node
	watched map[string]bool
	closed  bool
	pending []driver.Event // overflow, delivered in order by pump
	ports   int            // TaskPort answers given by default
	pumping bool

	events chan driver.Event
	done   chan struct{}
}

var _ driver.Driver = (*Driver)(nil)

// New returns an empty fake whose nodes get StartedAt from clk (the real clock if nil)
// and are ready at once.
func New(clk clock.PassiveClock) *Driver { return NewWithOptions(clk, Options{}) }

// NewWithOptions is New with options.
func NewWithOptions(clk clock.PassiveClock, opts Options) *Driver {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if opts.PendingReason == "" {
		opts.PendingReason = "Resources"
	}
	return &Driver{
		clk:     clk,
		opts:    opts,
		fail:    map[string][]error{},
		nodes:   map[string]*node{},
		watched: map[string]bool{},
		events:  make(chan driver.Event, eventBuffer),
		done:    make(chan struct{}),
	}
}

// Name returns "fake".
func (d *Driver) Name() string { return Name }

// Create starts a node, or returns the live node already under spec.Key. The node is
// watched. It is ready at once unless Options.CreatePending is set; then it waits for
// MakeReady.
func (d *Driver) Create(ctx context.Context, spec driver.NodeSpec) (driver.NodeInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodCreate, spec.Key); err != nil {
		return driver.NodeInfo{}, err
	}
	if spec.Key == "" {
		return driver.NodeInfo{}, fmt.Errorf("creating node: empty key")
	}
	n, ok := d.nodes[spec.Key]
	if !ok {
		n = &node{
			spec:  spec,
			info:  driver.NodeInfo{Key: spec.Key, Owner: spec.Owner, Address: "127.0.0.1", StartedAt: d.clk.Now(), Ready: true},
			tasks: map[string]*Task{},
		}
		if d.opts.CreatePending {
			n.info.Ready, n.info.Reason = false, d.opts.PendingReason
		}
		d.nodes[spec.Key] = n
	}
	d.watched[spec.Key] = true
	return n.info, nil
}

// Describe returns a live node and watches it, or driver.ErrNotFound.
func (d *Driver) Describe(ctx context.Context, key string) (driver.NodeInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodDescribe, key); err != nil {
		return driver.NodeInfo{}, err
	}
	n, ok := d.nodes[key]
	if !ok {
		return driver.NodeInfo{}, fmt.Errorf("describing node %s: %w", key, driver.ErrNotFound)
	}
	d.watched[key] = true
	return n.info, nil
}

// List returns the live nodes of owner ("" for all), sorted by key, and watches them.
func (d *Driver) List(ctx context.Context, owner string) ([]driver.NodeInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodList, owner); err != nil {
		return nil, err
	}
	var out []driver.NodeInfo
	for key, n := range d.nodes {
		if owner == "" || n.info.Owner == owner {
			out = append(out, n.info)
			d.watched[key] = true
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Terminate removes a node and its tasks; a missing node returns nil. It emits no event:
// the engine asked for it.
func (d *Driver) Terminate(ctx context.Context, key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodTerminate, key); err != nil {
		return err
	}
	delete(d.nodes, key)
	delete(d.watched, key)
	return nil
}

// StartTask starts a task, or does nothing when the key is known (running or ended). The
// task runs until FinishTask or KillTask, unless Options.Start says otherwise.
// driver.ErrNotFound if the node is gone, driver.ErrTransient if it is not ready.
func (d *Driver) StartTask(ctx context.Context, nodeKey string, spec driver.TaskSpec) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodStartTask, nodeKey+"/"+spec.Key); err != nil {
		return err
	}
	n, ok := d.nodes[nodeKey]
	if !ok {
		return fmt.Errorf("starting task %s on node %s: %w", spec.Key, nodeKey, driver.ErrNotFound)
	}
	if !n.info.Ready {
		return driver.Transient(fmt.Errorf("starting task %s: node %s is not ready (%s)", spec.Key, nodeKey, n.info.Reason))
	}
	if len(spec.Command) == 0 {
		return fmt.Errorf("starting task %s: empty command", spec.Key)
	}
	if _, ok := n.tasks[spec.Key]; ok {
		return nil
	}
	if err := driver.CheckTaskPaths(spec); err != nil {
		return driver.Permanent(fmt.Errorf("starting task %s: %w", spec.Key, err))
	}
	started := cloneSpec(spec)
	if d.opts.Dir != "" {
		work := d.WorkDir(nodeKey, spec.Key)
		if err := makeWorkDir(work, spec); err != nil {
			return fmt.Errorf("starting task %s: %w", spec.Key, err)
		}
		if started.Env == nil {
			started.Env = map[string]string{}
		}
		started.Env[driver.WorkDirEnv] = work
	}
	t := &Task{Spec: cloneSpec(spec), Status: driver.TaskStatus{Running: true}}
	n.tasks[spec.Key] = t
	if d.opts.Start != nil {
		out := d.opts.Start(nodeKey, started)
		t.Output = append(t.Output, out.Output...)
		if out.Exited {
			d.endTask(nodeKey, spec.Key, t, out.ExitCode)
		}
	}
	return nil
}

// TaskStatus returns a task's state; driver.ErrNotFound if the node or task is unknown.
func (d *Driver) TaskStatus(ctx context.Context, nodeKey, taskKey string) (driver.TaskStatus, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodTaskStatus, nodeKey+"/"+taskKey); err != nil {
		return driver.TaskStatus{}, err
	}
	t, err := d.task(nodeKey, taskKey)
	if err != nil {
		return driver.TaskStatus{}, err
	}
	return t.Status, nil
}

// TaskOutput returns what AppendOutput wrote from offset on.
func (d *Driver) TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodTaskOutput, nodeKey+"/"+taskKey); err != nil {
		return nil, err
	}
	t, err := d.task(nodeKey, taskKey)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("reading output of task %s: negative offset", taskKey)
	}
	if offset >= int64(len(t.Output)) {
		return []byte{}, nil
	}
	return append([]byte(nil), t.Output[offset:]...), nil
}

// KillTask ends a running task with 137 and emits TaskExited (as a real driver does when
// the killed process exits); killing an ended task returns nil.
func (d *Driver) KillTask(ctx context.Context, nodeKey, taskKey string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodKillTask, nodeKey+"/"+taskKey); err != nil {
		return err
	}
	t, err := d.task(nodeKey, taskKey)
	if err != nil {
		return err
	}
	d.endTask(nodeKey, taskKey, t, KilledExitCode)
	return nil
}

// WorkDir returns a task's working directory under Options.Dir ("" without Dir). The
// test may write a task's outputs there, as its command would.
func (d *Driver) WorkDir(nodeKey, taskKey string) string {
	if d.opts.Dir == "" {
		return ""
	}
	return filepath.Join(d.opts.Dir, url.PathEscape(nodeKey), url.PathEscape(taskKey))
}

func makeWorkDir(work string, spec driver.TaskSpec) error {
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if spec.CodeDir != "" {
		if err := driver.CopyTree(spec.CodeDir, work); err != nil {
			return fmt.Errorf("copying code dir: %w", err)
		}
	}
	for _, in := range spec.Inputs {
		if err := driver.CopyTree(in.Src, filepath.Join(work, filepath.FromSlash(in.Dest))); err != nil {
			return fmt.Errorf("copying input %s: %w", in.Dest, err)
		}
	}
	return driver.MakeOutputDirs(work, spec.Outputs)
}

// FetchOutput streams rel of an ended task's working directory under Options.Dir;
// driver.ErrPermanent without Dir or while the task runs.
func (d *Driver) FetchOutput(ctx context.Context, nodeKey, taskKey, rel string) (io.ReadCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodFetch, nodeKey+"/"+taskKey); err != nil {
		return nil, err
	}
	t, err := d.task(nodeKey, taskKey)
	if err != nil {
		return nil, err
	}
	switch {
	case d.opts.Dir == "":
		return nil, driver.Permanent(fmt.Errorf("fetching output %s of task %s: the fake keeps no task files (set Options.Dir)", rel, taskKey))
	case t.Status.Running:
		return nil, driver.Permanent(fmt.Errorf("fetching output %s of task %s: the task is still running", rel, taskKey))
	}
	return driver.FetchLocalOutput(ctx, d.WorkDir(nodeKey, taskKey), rel)
}

// Events delivers NodeReady (MakeReady), NodeGone (KillNode) and TaskExited (FinishTask,
// KillTask, a task that Options.Start ends at once) for watched nodes. It is never closed.
func (d *Driver) Events() <-chan driver.Event { return d.events }

// Close stops watching: nodes and tasks stay, and events stop until Describe or List
// watch a node again (as after an engine restart).
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, Call{Method: MethodClose})
	d.watched = map[string]bool{}
	d.pending = nil
	if !d.closed {
		d.closed = true
		close(d.done)
	}
	return nil
}

// Reopen makes a closed fake usable again, as a new driver over the same nodes would be
// after an engine restart. Nothing is watched until Create, Describe or List.
func (d *Driver) Reopen() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		d.closed = false
		d.done = make(chan struct{})
	}
}

// FailNext makes the next call of method (MethodCreate, ...) return err without doing
// anything. Several FailNext calls queue up in order. Any kind can be injected:
// driver.ErrNoCapacity, driver.Transient(cause), driver.Permanent(cause), or a wrapped
// driver.ErrNotFound.
func (d *Driver) FailNext(method string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail[method] = append(d.fail[method], err)
}

// FinishTask ends a running task with exitCode and emits TaskExited if its node is
// watched. It panics if the node or task does not exist, which is a bug in the test.
func (d *Driver) FinishTask(nodeKey, taskKey string, exitCode int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.task(nodeKey, taskKey)
	if err != nil {
		panic(fmt.Sprintf("fake.FinishTask: %v", err))
	}
	d.endTask(nodeKey, taskKey, t, exitCode)
}

// MakeReady makes a pending node ready (Ready true, Reason cleared) and emits NodeReady
// if it is watched, as a queued allocation that starts running. A node that is already
// ready stays as it is, without an event. It panics if the node does not exist, which is
// a bug in the test.
func (d *Driver) MakeReady(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.nodes[key]
	if !ok {
		panic(fmt.Sprintf("fake.MakeReady: node %s does not exist", key))
	}
	if n.info.Ready {
		return
	}
	n.info.Ready, n.info.Reason = true, ""
	if d.watched[key] {
		d.emit(driver.Event{Kind: driver.NodeReady, NodeKey: key})
	}
}

// SetPendingReason changes the Reason of a node that is not ready (a cluster manager's
// pending reason changing from "Priority" to "Resources"). It panics if the node does
// not exist or is ready.
func (d *Driver) SetPendingReason(key, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.nodes[key]
	if !ok || n.info.Ready {
		panic(fmt.Sprintf("fake.SetPendingReason: node %s does not exist or is ready", key))
	}
	n.info.Reason = reason
}

// Unschedulable is SetPendingReason with a NodeWaiting event, as a cluster manager's
// scheduler refusing to place the node ("0/1 nodes are available: 1 Insufficient cpu.").
func (d *Driver) Unschedulable(key, reason string) {
	d.SetPendingReason(key, reason)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watched[key] {
		d.emit(driver.Event{Kind: driver.NodeWaiting, NodeKey: key, Reason: reason})
	}
}

// KillNode makes a node die on its own, or its allocation end by itself (a time limit,
// preemption, a failed machine): it disappears with its tasks and NodeGone is emitted if
// it was watched. It works on pending nodes too. Killing an unknown node does nothing.
func (d *Driver) KillNode(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.nodes[key]; !ok {
		return
	}
	delete(d.nodes, key)
	if d.watched[key] {
		delete(d.watched, key)
		d.emit(driver.Event{Kind: driver.NodeGone, NodeKey: key})
	}
}

// AppendOutput adds to a task's output, as if the process had printed it.
func (d *Driver) AppendOutput(nodeKey, taskKey string, data []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.task(nodeKey, taskKey)
	if err != nil {
		panic(fmt.Sprintf("fake.AppendOutput: %v", err))
	}
	t.Output = append(t.Output, data...)
}

// Calls returns a copy of the calls so far, in order.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

// CallsTo returns the keys of the recorded calls of one method, in order.
func (d *Driver) CallsTo(method string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var keys []string
	for _, c := range d.calls {
		if c.Method == method {
			keys = append(keys, c.Key)
		}
	}
	return keys
}

// ResetCalls forgets the recorded calls.
func (d *Driver) ResetCalls() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = nil
}

// Nodes returns the live nodes' keys, sorted.
func (d *Driver) Nodes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make([]string, 0, len(d.nodes))
	for k := range d.nodes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Node returns the spec a live node was created with.
func (d *Driver) Node(key string) (driver.NodeSpec, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.nodes[key]
	if !ok {
		return driver.NodeSpec{}, false
	}
	return n.spec, true
}

// Task returns a copy of a task on a live node.
func (d *Driver) Task(nodeKey, taskKey string) (Task, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.task(nodeKey, taskKey)
	if err != nil {
		return Task{}, false
	}
	c := *t
	c.Spec = cloneSpec(t.Spec)
	c.Output = append([]byte(nil), t.Output...)
	return c, true
}

// RunningTasks returns "node/task" for every running task, sorted.
func (d *Driver) RunningTasks() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for nk, n := range d.nodes {
		for tk, t := range n.tasks {
			if t.Status.Running {
				out = append(out, nk+"/"+tk)
			}
		}
	}
	sort.Strings(out)
	return out
}

// begin records a call and returns the injected error, if any, or ctx's error.
func (d *Driver) begin(ctx context.Context, method, key string) error {
	d.calls = append(d.calls, Call{Method: method, Key: key})
	if q := d.fail[method]; len(q) > 0 {
		err := q[0]
		if len(q) == 1 {
			delete(d.fail, method)
		} else {
			d.fail[method] = q[1:]
		}
		return err
	}
	return ctx.Err()
}

func (d *Driver) task(nodeKey, taskKey string) (*Task, error) {
	n, ok := d.nodes[nodeKey]
	if !ok {
		return nil, fmt.Errorf("finding node %s: %w", nodeKey, driver.ErrNotFound)
	}
	t, ok := n.tasks[taskKey]
	if !ok {
		return nil, fmt.Errorf("finding task %s on node %s: %w", taskKey, nodeKey, driver.ErrNotFound)
	}
	return t, nil
}

func (d *Driver) endTask(nodeKey, taskKey string, t *Task, code int) {
	if !t.Status.Running {
		return
	}
	t.Status = driver.TaskStatus{Running: false, ExitCode: code}
	if d.watched[nodeKey] {
		d.emit(driver.Event{Kind: driver.TaskExited, NodeKey: nodeKey, TaskKey: taskKey, ExitCode: code})
	}
}

// emit puts ev on the channel at once when there is room (the common case, so tests see
// it synchronously); otherwise it queues it behind earlier overflow, which a goroutine
// delivers in order. Called with d.mu held.
func (d *Driver) emit(ev driver.Event) {
	if len(d.pending) == 0 {
		select {
		case d.events <- ev:
			return
		default:
		}
	}
	d.pending = append(d.pending, ev)
	if !d.pumping {
		d.pumping = true
		go d.pump(d.done)
	}
}

func (d *Driver) pump(done <-chan struct{}) {
	for {
		d.mu.Lock()
		if len(d.pending) == 0 {
			d.pumping = false
			d.mu.Unlock()
			return
		}
		ev := d.pending[0]
		d.mu.Unlock()
		select {
		case d.events <- ev:
		case <-done:
			d.mu.Lock()
			d.pumping = false
			d.mu.Unlock()
			return
		}
		d.mu.Lock()
		d.pending = d.pending[1:]
		d.mu.Unlock()
	}
}

func cloneSpec(s driver.TaskSpec) driver.TaskSpec {
	s.Command = append([]string(nil), s.Command...)
	s.Inputs = append([]driver.TaskInput(nil), s.Inputs...)
	s.Outputs = append([]driver.TaskOutput(nil), s.Outputs...)
	if s.Env != nil {
		env := make(map[string]string, len(s.Env))
		for k, v := range s.Env {
			env[k] = v
		}
		s.Env = env
	}
	return s
}

// TaskPort answers FirstTaskPort, FirstTaskPort+1, ... one per call in the order of the
// calls, so a test knows which port each ask got and no two asks get the same one;
// Options.TaskPort replaces this. driver.ErrNotFound if the node is gone,
// driver.ErrTransient if it is not ready.
func (d *Driver) TaskPort(ctx context.Context, nodeKey string) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(ctx, MethodTaskPort, nodeKey); err != nil {
		return 0, err
	}
	n, ok := d.nodes[nodeKey]
	if !ok {
		return 0, fmt.Errorf("finding a port on node %s: %w", nodeKey, driver.ErrNotFound)
	}
	if !n.info.Ready {
		return 0, driver.Transient(fmt.Errorf("finding a port: node %s is not ready (%s)", nodeKey, n.info.Reason))
	}
	if d.opts.TaskPort != nil {
		return d.opts.TaskPort(nodeKey)
	}
	d.ports++
	return FirstTaskPort + d.ports - 1, nil
}

// Exec echoes the session's stdin to its output (a stand-in for an interactive shell) and
// returns 0 when stdin ends, or the context's error when ctx ends first; Options.Exec
// replaces this. driver.ErrNotFound if the node is gone, driver.ErrTransient if it is
// not ready.
func (d *Driver) Exec(ctx context.Context, nodeKey string, spec driver.ExecSpec) (int, error) {
	d.mu.Lock()
	err := d.begin(ctx, MethodExec, nodeKey)
	n, alive := d.nodes[nodeKey]
	ready := alive && n.info.Ready
	d.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if !alive {
		return 0, fmt.Errorf("finding node %s: %w", nodeKey, driver.ErrNotFound)
	}
	if !ready {
		return 0, driver.Transient(fmt.Errorf("running a session on node %s: the node is not ready", nodeKey))
	}
	if d.opts.Exec != nil {
		return d.opts.Exec(ctx, nodeKey, spec)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(spec.Output, spec.Stdin)
		done <- err
	}()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case err := <-done:
		return 0, err
	}
}
