package local

import (
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// A node that comes up from zero waits for its agent process to start, and starting a Go
// process (exec, the runtime, package initialisation) is most of that wait. So once the
// driver has created a node it keeps one agent on standby (nodeagent.SpawnStandby): a
// process that serves nothing and waits to be told its node directory. The next Create
// hands it the new node's directory, and it serves the node as soon as it has taken the
// directory's lock; the driver starts the next standby agent in the background once the
// new node has had time to start its first task (standbyDelay). The standby agent exits
// when the driver closes, and by itself when the engine dies (its end of the pipe closes).
// An engine that never created a node keeps none. Once assigned, the agent names its node's
// directory in its own command line (nodeagent's cmdline.go), so ps shows the node.

// spawnAgent starts the agent of the node in dir: the standby agent when one waits, else a
// new process. Either way it prepares the next standby agent.
func (d *Driver) spawnAgent(dir string) (*nodeagent.Spawned, error) {
	d.mu.Lock()
	standby := d.standby
	d.standby = nil
	d.mu.Unlock()
	defer d.goPrepareStandby()
	if standby != nil {
		err := standby.Assign(dir)
		if err == nil {
			return standby.Spawned, nil
		}
		d.log.Debug("standby node agent unusable; starting one", "error", err)
	}
	return nodeagent.Spawn(d.argv, dir)
}

// standbyDelay is how long after a Create the next standby agent starts: starting a
// process takes a core for about a millisecond, which the new node's first task would
// otherwise wait for on a small machine.
const standbyDelay = 100 * time.Millisecond

// goPrepareStandby starts a standby agent in the background unless one waits or is
// being started, or the driver is closed.
func (d *Driver) goPrepareStandby() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.standby != nil || d.preparing {
		return
	}
	d.preparing = true
	d.wg.Add(1)
	t := d.clk.NewTimer(standbyDelay) // set before Create returns, so a test's fake clock has it
	go func() {
		defer d.wg.Done()
		defer t.Stop()
		select {
		case <-t.C():
		case <-d.ctx.Done():
			d.mu.Lock()
			d.preparing = false
			d.mu.Unlock()
			return
		}
		d.prepareStandby()
	}()
}

// prepareStandby starts a standby agent and keeps it, unless the driver closed meanwhile.
func (d *Driver) prepareStandby() {
	s, err := nodeagent.SpawnStandby(d.argv, d.dir)
	d.mu.Lock()
	d.preparing = false
	if err == nil && !d.closed && d.standby == nil {
		d.standby, s = s, nil
	}
	d.mu.Unlock()
	if err != nil {
		d.log.Warn("starting a standby node agent failed", "error", err)
		return
	}
	if s != nil {
		d.cancelStandby(s)
	}
}

// cancelStandby lets a standby agent go and returns once it has exited: it exits on its
// own when told (EOF on its pipe), and is killed if it has not within StopTimeout.
func (d *Driver) cancelStandby(s *nodeagent.Standby) {
	s.Cancel()
	t := d.clk.NewTimer(d.stopTimeout)
	defer t.Stop()
	select {
	case <-s.Done:
		return
	case <-t.C():
	}
	d.log.Warn("standby node agent did not exit; killing it", "agent_pid", s.Cmd.Process.Pid)
	_ = s.Cmd.Process.Kill()
	<-s.Done
}
