package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// adopt checks that a live agent serves dir and watches it (and its running tasks).
// ErrNotFound when the node has no record or its agent is dead. The caller holds the
// node's key lock.
func (d *Driver) adopt(ctx context.Context, key, dir string) (driver.NodeInfo, error) {
	rec, err := readRecord(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return driver.NodeInfo{}, driver.ErrNotFound
	}
	if err != nil {
		return driver.NodeInfo{}, fmt.Errorf("reading node record: %w", err)
	}
	c := d.client(key, dir)
	first, err := c.Info(ctx)
	if err != nil {
		return driver.NodeInfo{}, d.mapErr(dir, err)
	}
	if first.Dir != dir {
		return driver.NodeInfo{}, fmt.Errorf("the agent on %s serves %s", dir, first.Dir)
	}
	// Hold the agent by pidfd, then ask again: if the same pid still answers, the pidfd
	// is the agent's and its exit will wake the watcher.
	p, err := proc.Open(first.Pid)
	if errors.Is(err, proc.ErrGone) {
		return driver.NodeInfo{}, fmt.Errorf("node agent exited: %w", driver.ErrNotFound)
	}
	if err != nil {
		return driver.NodeInfo{}, err
	}
	second, err := c.Info(ctx)
	if err == nil && second.Pid != first.Pid {
		err = fmt.Errorf("node agent changed from pid %d to %d", first.Pid, second.Pid)
	}
	if err != nil {
		p.Close()
		return driver.NodeInfo{}, d.mapErr(dir, err)
	}
	d.watchNode(key, dir, c, p, second.Tasks)
	return nodeInfo(rec), nil
}

// adoptSpawned watches the agent Create has just started (and seen serving) by its pid,
// without the two questions adopt asks over the socket: a child that has not been reaped
// cannot have had its pid reused, so a pidfd opened before the reaper ran is the agent's.
// A fresh agent runs no task yet. ok is false when that cannot be shown; adopt then
// decides.
func (d *Driver) adoptSpawned(key, dir string, sp *nodeagent.Spawned, rec nodeRecord) (driver.NodeInfo, bool) {
	p, err := proc.Open(sp.Cmd.Process.Pid)
	if err != nil {
		return driver.NodeInfo{}, false
	}
	select {
	case <-sp.Done:
		p.Close()
		return driver.NodeInfo{}, false
	default:
	}
	d.watchNode(key, dir, d.client(key, dir), p, nil)
	return nodeInfo(rec), true
}

// describeWatched answers Describe for a node whose agent is watched: its pidfd has not
// fired, so it lives, and its tasks are watched already.
func (d *Driver) describeWatched(key, dir string) (driver.NodeInfo, bool) {
	d.mu.Lock()
	w := d.watches[key]
	d.mu.Unlock()
	if w == nil || w.dir != dir {
		return driver.NodeInfo{}, false
	}
	rec, err := readRecord(dir)
	if err != nil {
		return driver.NodeInfo{}, false
	}
	return nodeInfo(rec), true
}

func nodeInfo(rec nodeRecord) driver.NodeInfo {
	return driver.NodeInfo{Key: rec.Key, Owner: rec.Owner, Address: Address, StartedAt: rec.Created, Ready: true}
}

// watchNode starts watching the agent held by p, taking ownership of p, unless that agent
// is already watched; either way it watches the given running tasks.
func (d *Driver) watchNode(key, dir string, c *nodeagent.Client, p *proc.Proc, tasks []nodeagent.TaskState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		p.Close()
		return
	}
	w := d.watches[key]
	if w != nil && w.pid != p.Pid() {
		// Another agent serves the node now; the old watch ends without an event.
		delete(d.watches, key)
		w.cancel()
		w = nil
	}
	if w != nil {
		p.Close()
	} else {
		ctx, cancel := context.WithCancel(d.ctx)
		w = &watch{key: key, dir: dir, pid: p.Pid(), client: c, ctx: ctx, cancel: cancel, tasks: map[string]bool{}}
		d.watches[key] = w
		d.wg.Add(1)
		go d.watchAgent(w, p)
		d.log.Debug("watching node", "node", key, "agent_pid", w.pid)
	}
	for _, t := range tasks {
		if t.Running {
			d.watchTaskLocked(w, t.Key)
		}
	}
}

// watched returns the watch of a live node, adopting the node if needed.
func (d *Driver) watched(ctx context.Context, key string) (*watch, error) {
	d.mu.Lock()
	w := d.watches[key]
	d.mu.Unlock()
	if w != nil {
		return w, nil
	}
	dir, err := d.nodeDir(key)
	if err != nil {
		return nil, err
	}
	unlock := d.keys.Lock(key)
	defer unlock()
	if _, err := d.adopt(ctx, key, dir); err != nil {
		return nil, err
	}
	d.mu.Lock()
	w = d.watches[key]
	d.mu.Unlock()
	if w == nil {
		return nil, errors.New("the driver is closed")
	}
	return w, nil
}

// unwatch stops watching a node without an event.
func (d *Driver) unwatch(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.watches[key]; w != nil {
		delete(d.watches, key)
		w.cancel()
	}
	if dir, err := d.nodeDir(key); err == nil {
		if c := d.clients[dir]; c != nil {
			c.CloseIdleConnections()
			delete(d.clients, dir)
		}
	}
}

// client returns the (shared) client of a node's agent.
func (d *Driver) client(key, dir string) *nodeagent.Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.watches[key]; w != nil && w.dir == dir {
		return w.client
	}
	c := d.clients[dir]
	if c == nil {
		c = nodeagent.NewClient(dir)
		d.clients[dir] = c
	}
	return c
}

// watchAgent sleeps until the agent exits. An exit nobody asked for (not Terminate, not
// Close) means the node died: the tasks it left are killed, then NodeGone is emitted.
func (d *Driver) watchAgent(w *watch, p *proc.Proc) {
	defer d.wg.Done()
	defer p.Close()
	if err := p.Wait(w.ctx); err != nil {
		return // unwatched, terminated or closed
	}
	d.mu.Lock()
	current := d.watches[w.key] == w
	if current {
		delete(d.watches, w.key)
	}
	d.mu.Unlock()
	w.cancel()
	if !current {
		return
	}
	d.log.Warn("node agent died", "node", w.key, "agent_pid", w.pid)
	unlock := d.keys.Lock(w.key)
	ctx, cancel := d.withTimeout(d.ctx, d.stopTimeout)
	n, err := nodeagent.RecoverDir(ctx, w.dir, d.log)
	cancel()
	unlock()
	switch {
	case errors.Is(err, nodeagent.ErrAgentRunning):
		d.log.Debug("a new agent already serves the node", "node", w.key)
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		d.log.Error("cleaning up after a dead node agent failed", "node", w.key, "error", err)
	case n > 0:
		d.log.Warn("killed tasks the dead node agent left", "node", w.key, "tasks", n)
	}
	d.emit(driver.Event{Kind: driver.NodeGone, NodeKey: w.key})
}

// watchTaskLocked starts a long poll for a task's exit unless one runs. Called with d.mu.
func (d *Driver) watchTaskLocked(w *watch, key string) {
	if w.tasks[key] {
		return
	}
	w.tasks[key] = true
	d.wg.Add(1)
	go d.watchTask(w, key)
}

// watchTask holds a long poll that the agent answers when the task exits. Errors (other
// than the node's end, which the agent watcher reports) are retried with a backoff.
func (d *Driver) watchTask(w *watch, key string) {
	defer d.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		st, err := w.client.Wait(w.ctx, key)
		if err == nil && !st.Running {
			d.taskExited(w, key, st.ExitCode)
			return
		}
		if w.ctx.Err() != nil {
			return
		}
		if errors.Is(err, nodeagent.ErrNotFound) {
			d.mu.Lock()
			delete(w.tasks, key)
			d.mu.Unlock()
			return
		}
		d.log.Debug("waiting for a task failed; retrying", "node", w.key, "task", key, "error", err)
		t := d.clk.NewTimer(backoff)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
}

func (d *Driver) taskExited(w *watch, key string, code int) {
	d.mu.Lock()
	ok := d.watches[w.key] == w && w.tasks[key]
	if ok {
		delete(w.tasks, key)
	}
	d.mu.Unlock()
	if ok {
		d.log.Debug("task exited", "node", w.key, "task", key, "exit_code", code)
		d.emit(driver.Event{Kind: driver.TaskExited, NodeKey: w.key, TaskKey: key, ExitCode: code})
	}
}

func (d *Driver) emit(ev driver.Event) {
	select {
	case d.events <- ev:
	case <-d.ctx.Done():
	}
}

// agentProc returns a handle on the live agent of dir, or nil when none runs. The pid
// comes from agent.pid and is trusted only if, after the pidfd is open, the process is
// still an agent for dir (its command line, or its answer on the socket, says so).
func (d *Driver) agentProc(ctx context.Context, dir string) *proc.Proc {
	pid, err := nodeagent.ReadPid(dir)
	if err != nil {
		return nil
	}
	p, err := proc.Open(pid)
	if err != nil {
		return nil
	}
	ok := nodeagent.IsAgentFor(pid, dir)
	if !ok {
		info, err := nodeagent.NewClient(dir).Info(ctx)
		ok = err == nil && info.Pid == pid
	}
	if !ok || p.Exited() {
		p.Close()
		return nil
	}
	return p
}

// agentAlive reports whether dir's agent process is alive, answering or not.
func (d *Driver) agentAlive(dir string) bool {
	pid, err := nodeagent.ReadPid(dir)
	return err == nil && proc.Alive(pid) && nodeagent.IsAgentFor(pid, dir)
}

// stopAgent SIGTERMs the agent, SIGKILLs it after the grace period, and returns once it
// has exited.
func (d *Driver) stopAgent(ctx context.Context, p *proc.Proc) error {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	wctx, cancel := d.withTimeout(ctx, d.stopTimeout)
	err := p.Wait(wctx)
	cancel()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.log.Warn("node agent did not stop after SIGTERM; killing it", "agent_pid", p.Pid(), "grace", d.stopTimeout.String())
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	wctx, cancel = d.withTimeout(ctx, d.stopTimeout)
	defer cancel()
	if err := p.Wait(wctx); err != nil {
		return fmt.Errorf("waiting for node agent %d to exit: %w", p.Pid(), err)
	}
	return nil
}

// mapErr turns agent errors into driver errors: an unknown task, or an agent that is not
// running, is ErrNotFound; an agent that runs but does not answer is ErrTransient.
func (d *Driver) mapErr(dir string, err error) error {
	switch {
	case errors.Is(err, nodeagent.ErrNotFound):
		return driver.ErrNotFound
	case errors.Is(err, nodeagent.ErrUnreachable) && !d.agentAlive(dir):
		return fmt.Errorf("node agent is not running: %w", driver.ErrNotFound)
	case errors.Is(err, nodeagent.ErrUnreachable):
		return driver.Transient(err)
	}
	return err
}
