package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/remotetask"
)

// Lookup returns how to reach the machine a node stands for, or driver.ErrNotFound when
// the engine no longer holds the node. The engine backs it with its store, so secrets
// live in one place and a rotated credential is used from the next connection on.
type Lookup func(ctx context.Context, nodeKey string) (Target, error)

// Tasks returns the keys of the tasks the engine records as started on a node and not yet
// ended, or driver.ErrNotFound when the engine no longer holds the node.
type Tasks func(ctx context.Context, nodeKey string) ([]string, error)

// DriverConfig configures a Driver. Lookup is required.
type DriverConfig struct {
	Lookup Lookup
	// Tasks, when set, names the tasks adopting a node watches besides those the machine
	// lists as running, so a task that ended while nobody watched (the engine was down)
	// still reports its exit, once the machine answers.
	Tasks Tasks
	// Clock times keep-alives and reconnect back-off; the real clock when nil. These are
	// transport timings, not engine rules, so they run on a real clock even in tests.
	Clock  clock.WithTicker
	Logger hclog.Logger
	// KeepAlive is how often an idle connection is checked (default 5 s); a connection
	// that does not answer within twice that is closed, so a silently dropped network
	// is noticed and waits on it reconnect.
	KeepAlive time.Duration
	// DialTimeout bounds one connection attempt (default 10 s).
	DialTimeout time.Duration
	// Containers runs the tasks that come with an image (TaskSpec.Container); nil: such a
	// task is refused.
	Containers *ContainerRunner
}

// Driver is the node driver of attached machines: a node is an attached machine, reached
// over SSH with the Target the Lookup returns for its key. It never creates or removes a
// machine. A task runs under the remote wrapper of Client.Start in
// ~/.mlcompute/tasks/<node key>.<task key>, so tasks of different nodes (and engines)
// sharing a machine never collide. Every started or adopted task has a watcher: a remote
// wait on one connection per machine, which reconnects with back-off when the connection
// drops, so TaskExited is delivered once the machine is reachable again.
//
// A node is ready from Create on (NodeInfo.Ready is always true; no NodeReady): the
// machine answered, and one that stops answering is still the node. Errors: ErrNotFound
// for a node the engine no longer holds (Lookup says so) or that Terminate detached, and
// for an unknown task; ErrTransient for a machine that cannot be reached (unreachable,
// refused, a connection that dropped and could not be made again); ErrPermanent for one
// that rejects the engine (credentials, host key, not Linux), an unusable target, and
// Exec, which attached machines do not offer. The driver never reports NodeGone and lists
// no nodes.
type Driver struct {
	cfg    DriverConfig
	ctx    context.Context
	cancel context.CancelFunc
	events chan driver.Event
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[string]*Client // node key -> its machine's connection
	nodes map[string]*node   // node key -> its watched tasks, from its first watch or Describe to detach
	// detached holds the nodes Terminate detached: until Create, no connection is made for
	// them and none of their tasks is watched. One key per detached node.
	detached map[string]bool
}

// node is what the driver keeps about a node whose tasks it watches.
type node struct {
	tasks *remotetask.Tasks
	// stop ends the node's watches (and its adoption) when Terminate detaches it.
	stop context.CancelFunc
	// adopted says Describe started watching the tasks the node runs: once per attach.
	adopted bool
}

// errDetached is what calls for a node get once Terminate detached it.
var errDetached = fmt.Errorf("the node was detached: %w", driver.ErrNotFound)

var _ driver.Driver = (*Driver)(nil)

// NewDriver returns a driver; Close stops its watchers and connections.
func NewDriver(cfg DriverConfig) *Driver {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 5 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Driver{
		cfg: cfg, ctx: ctx, cancel: cancel, events: make(chan driver.Event, 64),
		conns: map[string]*Client{}, nodes: map[string]*node{}, detached: map[string]bool{},
	}
}

// Name is "ssh".
func (d *Driver) Name() string { return "ssh" }

// client returns the node's connection, dialing when there is none; fresh says it was
// dialed for this call. A failed dial is a *Error, which matches driver.ErrTransient or
// driver.ErrPermanent.
func (d *Driver) client(ctx context.Context, nodeKey string) (c *Client, fresh bool, err error) {
	t, err := d.cfg.Lookup(ctx, nodeKey)
	if err != nil {
		return nil, false, err
	}
	d.mu.Lock()
	c, detached := d.conns[nodeKey], d.detached[nodeKey]
	d.mu.Unlock()
	switch {
	case detached:
		return nil, false, errDetached
	case c != nil:
		return c, false, nil
	}
	dctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout)
	defer cancel()
	c, err = Dial(dctx, t)
	if err != nil {
		return nil, false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		_ = c.Close()
		return nil, false, errors.New("the ssh driver is closed")
	}
	if d.detached[nodeKey] { // Terminate ran while this call dialed
		_ = c.Close()
		return nil, false, errDetached
	}
	if cur := d.conns[nodeKey]; cur != nil { // another call dialed first
		_ = c.Close()
		return cur, false, nil
	}
	d.conns[nodeKey] = c
	d.wg.Add(1)
	go d.keepAlive(nodeKey, c)
	return c, true, nil
}

// drop forgets a connection that failed, so the next call dials again.
func (d *Driver) drop(nodeKey string, c *Client) {
	d.mu.Lock()
	if d.conns[nodeKey] == c {
		delete(d.conns, nodeKey)
	}
	d.mu.Unlock()
	_ = c.Close()
}

// keepAlive closes c when the machine stops answering, which ends every session on it.
func (d *Driver) keepAlive(nodeKey string, c *Client) {
	defer d.wg.Done()
	closed := make(chan struct{})
	go func() { _ = c.conn.Wait(); close(closed) }()
	ticker := d.cfg.Clock.NewTicker(d.cfg.KeepAlive)
	defer ticker.Stop()
	for {
		select {
		case <-closed:
			d.drop(nodeKey, c)
			return
		case <-d.ctx.Done():
			_ = c.Close()
			return
		case <-ticker.C():
		}
		answered := make(chan error, 1)
		go func() {
			_, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		select {
		case err := <-answered:
			if err == nil {
				continue
			}
		case <-d.cfg.Clock.After(2 * d.cfg.KeepAlive):
			d.cfg.Logger.Warn("attached machine stopped answering; reconnecting", "node", nodeKey, "address", c.target.hostPort())
		case <-d.ctx.Done():
		}
		d.drop(nodeKey, c)
		<-closed
		return
	}
}

// do runs f on the node's connection. When f fails and the connection no longer answers,
// it is dropped (which ends every session on it) and, when it was an older connection
// (which may have died since it was last used, before the keep-alive noticed), f runs once
// more on a fresh one; every f is idempotent, so running it twice is safe. Any other
// failure (a remote command's exit status, a local error, a missing task) is f's own: it
// is returned as it is, and the connection and its other sessions carry on. A failure of
// a fresh connection that then stops answering is driver.ErrTransient.
func (d *Driver) do(ctx context.Context, nodeKey string, f func(*Client) error) error {
	for {
		c, fresh, err := d.client(ctx, nodeKey)
		if err != nil {
			return err
		}
		err = f(c)
		if err == nil || driver.IsNotFound(err) || ctx.Err() != nil || d.answers(c) {
			return err
		}
		d.drop(nodeKey, c)
		if fresh {
			return driver.Transient(err)
		}
	}
}

// answers reports whether c still carries requests: a keep-alive answered within twice
// the keep-alive interval, as the keep-alive loop allows.
func (d *Driver) answers(c *Client) bool {
	answered := make(chan error, 1)
	go func() { // ends at the latest when c is closed
		_, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		return err == nil
	case <-d.cfg.Clock.After(2 * d.cfg.KeepAlive):
		return false
	}
}

// Create checks that the machine is reachable with the node's target (the host key as
// pinned) and returns the node, ready. It creates nothing: the node is the machine. It
// undoes a Terminate: the node is attached again.
func (d *Driver) Create(ctx context.Context, spec driver.NodeSpec) (driver.NodeInfo, error) {
	d.mu.Lock()
	delete(d.detached, spec.Key)
	d.mu.Unlock()
	if err := d.do(ctx, spec.Key, func(*Client) error { return nil }); err != nil {
		return driver.NodeInfo{}, err
	}
	t, err := d.cfg.Lookup(ctx, spec.Key)
	if err != nil {
		return driver.NodeInfo{}, err
	}
	return driver.NodeInfo{Key: spec.Key, Owner: spec.Owner, Address: t.Address, StartedAt: d.cfg.Clock.Now(), Ready: true}, nil
}

// Describe returns the node while the engine holds it, without waiting for the machine:
// an unreachable machine is not a gone one, and an engine that restarts must not wait for
// every machine. In the background it reconnects (with back-off) and watches the node's
// tasks that are still running and those Tasks names (which may have ended while nobody
// watched), which is how a restarted engine re-attaches to them and learns how they ended.
// The node is ready (an unreachable machine's calls fail with ErrTransient until it
// answers). ErrNotFound once Terminate detached the node, until Create attaches it again.
func (d *Driver) Describe(ctx context.Context, key string) (driver.NodeInfo, error) {
	t, err := d.cfg.Lookup(ctx, key)
	if err != nil {
		return driver.NodeInfo{}, err
	}
	d.mu.Lock()
	if d.detached[key] {
		d.mu.Unlock()
		return driver.NodeInfo{}, fmt.Errorf("describing node %s: %w", key, errDetached)
	}
	n := d.node(key)
	adopt := n != nil && !n.adopted
	if adopt {
		n.adopted = true
		d.wg.Add(1)
	}
	d.mu.Unlock()
	if adopt {
		go d.adopt(key, n.tasks)
	}
	return driver.NodeInfo{Key: key, Address: t.Address, Ready: true}, nil
}

// adopt watches the node's running tasks and those Tasks names, listing them again with
// back-off until the machine answers; it ends when the node is detached or the driver
// closes.
func (d *Driver) adopt(nodeKey string, tasks *remotetask.Tasks) {
	defer d.wg.Done()
	tasks.Retry("listing the running tasks of an adopted machine", func(ctx context.Context) error {
		var keys []string
		err := d.do(ctx, nodeKey, func(c *Client) (err error) {
			keys, err = c.RunningTasks(ctx, nodeKey+".")
			return err
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			d.watch(nodeKey, strings.TrimPrefix(k, nodeKey+"."))
		}
		if d.cfg.Tasks != nil {
			recorded, err := d.cfg.Tasks(ctx, nodeKey)
			if err != nil {
				return err
			}
			for _, k := range recorded {
				d.watch(nodeKey, k)
			}
		}
		return nil
	})
}

// node returns the watched tasks of the node, watching it from now on; nil once Terminate
// detached it or the driver closed, when no task of it is watched. Called with d.mu held.
func (d *Driver) node(key string) *node {
	if d.detached[key] || d.ctx.Err() != nil {
		return nil
	}
	n := d.nodes[key]
	if n == nil {
		ctx, stop := context.WithCancel(d.ctx)
		n = &node{tasks: remotetask.New(ctx, d.cfg.Clock, &d.wg, d.cfg.Logger.With("node", key)), stop: stop}
		d.nodes[key] = n
	}
	return n
}

// watch delivers TaskExited for a task once it ends, however often the connection drops
// in between (remotetask.Tasks.Watch retries the wait with back-off). A task whose
// directory disappeared while the engine holds the node is reported with ExitLost.
func (d *Driver) watch(nodeKey, taskKey string) {
	d.mu.Lock()
	n := d.node(nodeKey)
	d.mu.Unlock()
	if n == nil {
		return
	}
	rkey := driver.MachineTaskKey(nodeKey, taskKey)
	n.tasks.Watch(taskKey,
		func(ctx context.Context) (running bool, code int, err error) {
			err = d.do(ctx, nodeKey, func(c *Client) (err error) {
				running, code, err = c.Wait(ctx, rkey)
				return err
			})
			return running, code, err
		},
		func(_ context.Context, code int) {
			// Sent until the driver closes, not only while the node is watched: Terminate
			// awaits these ends, and detaching must not drop one being delivered.
			select {
			case d.events <- driver.Event{Kind: driver.TaskExited, NodeKey: nodeKey, TaskKey: taskKey, ExitCode: code}:
			case <-d.ctx.Done():
			}
		},
		func(ctx context.Context, err error) (int, bool) {
			if errors.Is(err, errDetached) {
				return 0, false // Terminate detached the node: nobody waits for its events
			}
			if _, lerr := d.cfg.Lookup(ctx, nodeKey); lerr != nil {
				return 0, false // the node is gone, and its events with it
			}
			return ExitLost, true
		})
}

// List returns nothing: an attached machine has no nodes of its own to enumerate, so the
// engine's records are the only list, and nothing on a machine is ever an orphan to remove.
func (d *Driver) List(context.Context, string) ([]driver.NodeInfo, error) { return nil, nil }

// Terminate detaches the node: it kills the node's running tasks (their process groups),
// lets their watchers report the exits, then stops watching the node and closes its
// connection; it leaves everything else on the machine as it is. Until Create, no call
// for the node connects again, and Describe says ErrNotFound. It never fails because the
// machine cannot be reached: a detached machine is not the engine's to wait for, so that
// is logged and the node counts as gone.
func (d *Driver) Terminate(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DialTimeout+killLimit)
	defer cancel()
	defer d.detach(key)
	err := d.do(ctx, key, func(c *Client) error {
		keys, err := c.RunningTasks(ctx, key+".")
		if err != nil {
			return err
		}
		return c.KillAll(ctx, keys)
	})
	switch {
	case driver.IsNotFound(err):
	case err != nil:
		d.cfg.Logger.Warn("could not stop the tasks of a detached machine", "node", key, "error", err)
	default:
		d.mu.Lock()
		n := d.nodes[key]
		d.mu.Unlock()
		if n != nil {
			// The tasks were killed, so their watches report the exits at once; one that
			// cannot within the deadline is stopped by detach, as for an unreachable machine.
			_ = n.tasks.Await(ctx)
		}
	}
	return nil
}

// detach marks the node detached, stops its watches (those still running could not reach
// the machine, or Terminate gave up waiting) and closes its connection: nothing dials for
// the node until Create.
func (d *Driver) detach(key string) {
	d.mu.Lock()
	d.detached[key] = true
	n := d.nodes[key]
	delete(d.nodes, key)
	c := d.conns[key]
	delete(d.conns, key)
	d.mu.Unlock()
	if n != nil {
		n.stop()
	}
	if c != nil {
		_ = c.Close()
	}
}

// StartTask copies spec.CodeDir and spec.Inputs (when set) to ~/.mlcompute/code/<node>.<task> on the
// machine, starts the task there (in its own work directory otherwise) and watches it.
// Idempotent under spec.Key: a task that exists is neither copied again nor restarted.
func (d *Driver) StartTask(ctx context.Context, nodeKey string, spec driver.TaskSpec) error {
	rkey := driver.MachineTaskKey(nodeKey, spec.Key)
	err := d.do(ctx, nodeKey, func(c *Client) error {
		task := RemoteTask{Key: rkey, Command: spec.Command, Env: spec.Env, MakeDirs: OutputDirs(spec.Outputs)}
		if spec.Container != nil {
			if d.cfg.Containers == nil {
				return driver.Permanent(fmt.Errorf("starting task %s: it runs in a container image, and this engine cannot run images on attached machines", spec.Key))
			}
			var err error
			if task.Command, err = d.cfg.Containers.Command(ctx, c, ".mlcompute", rkey, spec.Container, spec.Command); err != nil {
				return fmt.Errorf("starting task %s: %w", spec.Key, err)
			}
		}
		if HasTaskFiles(spec) {
			task.WorkDir = ".mlcompute/code/" + rkey
			_, _, err := c.Status(ctx, rkey)
			switch {
			case driver.IsNotFound(err):
				if err := PutTaskFiles(ctx, c, spec, task.WorkDir); err != nil {
					return err
				}
			case err != nil:
				return err
			}
		}
		return c.Start(ctx, task)
	})
	if err != nil {
		return err
	}
	d.watch(nodeKey, spec.Key)
	return nil
}

// TaskStatus reads the task's state from the machine.
func (d *Driver) TaskStatus(ctx context.Context, nodeKey, taskKey string) (driver.TaskStatus, error) {
	var st driver.TaskStatus
	err := d.do(ctx, nodeKey, func(c *Client) (err error) {
		st.Running, st.ExitCode, err = c.Status(ctx, driver.MachineTaskKey(nodeKey, taskKey))
		return err
	})
	return st, err
}

// TaskOutput reads the task's output from the machine, from offset on.
func (d *Driver) TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error) {
	var out []byte
	err := d.do(ctx, nodeKey, func(c *Client) (err error) {
		out, err = c.Output(ctx, driver.MachineTaskKey(nodeKey, taskKey), offset)
		return err
	})
	return out, err
}

// FetchOutput streams rel of the ended task's working directory from the machine, tar
// over the SSH connection (see TaskStore.Fetch).
func (d *Driver) FetchOutput(ctx context.Context, nodeKey, taskKey, rel string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := d.do(ctx, nodeKey, func(c *Client) error {
		rc = c.tasks().FetchStream(ctx, driver.MachineTaskKey(nodeKey, taskKey), rel)
		return nil
	})
	return rc, err
}

// Exec is not offered on attached machines: people reach their own machines with ssh. It
// fails with driver.ErrPermanent.
func (d *Driver) Exec(context.Context, string, driver.ExecSpec) (int, error) {
	return 0, driver.Permanent(errors.New("interactive sessions are not offered on attached machines; connect with ssh"))
}

// KillTask kills the task's process group on the machine.
func (d *Driver) KillTask(ctx context.Context, nodeKey, taskKey string) error {
	return d.do(ctx, nodeKey, func(c *Client) error { return c.Kill(ctx, driver.MachineTaskKey(nodeKey, taskKey)) })
}

// Events delivers TaskExited for started and adopted tasks; an attached machine never
// reports NodeGone (an unreachable machine comes back, and its tasks with it).
func (d *Driver) Events() <-chan driver.Event { return d.events }

// Close stops the watchers and closes the connections; tasks keep running on the machines.
func (d *Driver) Close() error {
	d.cancel()
	d.mu.Lock()
	conns := d.conns
	d.conns = map[string]*Client{}
	d.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	d.wg.Wait()
	return nil
}
