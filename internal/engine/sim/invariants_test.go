package sim

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// check verifies every rule of DESIGN 4 the simulation covers against the settled engine.
// It also folds what it observes into the harness's model (job ends and starts of
// instances count as activity), before it judges the instances.
func (w *world) check() error {
	ctx := context.Background()
	now := w.now()
	computes := map[string]api.Compute{}
	var jobs []api.Job
	for _, ws := range workspaces {
		cs, err := w.e.ListComputes(ctx, ws.name)
		if err != nil {
			return w.fail("the engine answers", "ListComputes(%s): %v", ws.name, err)
		}
		for _, c := range cs {
			computes[ws.name+"/"+c.Name] = c
		}
		js, err := w.e.ListJobs(ctx, ws.name)
		if err != nil {
			return w.fail("the engine answers", "ListJobs(%s): %v", ws.name, err)
		}
		jobs = append(jobs, js...)
	}

	// No job lost: every submitted job exists, is queued, preparing or running, or ended
	// with a reason; an ended job never changes again.
	w.checks++
	byKey := map[string]api.Job{}
	for _, j := range jobs {
		byKey[j.Workspace+"/"+j.ID] = j
	}
	// A job stops at its limits.timeout: none is Running once its start plus its limit has
	// passed (the engine's timer fires at the deadline, which the settled clock reached).
	w.checks++
	for _, j := range jobs {
		if j.Status == api.JobRunning && j.TimeoutSeconds > 0 && j.StartedAt != nil &&
			!now.Before(j.StartedAt.Add(time.Duration(j.TimeoutSeconds)*time.Second)) {
			return w.fail("a job stops at its limit", "job %s started %s with limits.timeout %ds is still running at %s", j.ID, j.StartedAt, j.TimeoutSeconds, now)
		}
	}
	running := map[string]bool{} // job IDs with a running task
	for _, nt := range w.drv.RunningTasks() {
		_, task, _ := strings.Cut(nt, "/")
		if dot := strings.LastIndex(task, "."); dot > 0 {
			running[task[:dot]] = true
		}
	}
	for _, k := range w.jobOrder {
		m := w.jobs[k]
		j, ok := byKey[k]
		if !ok {
			return w.fail("no job lost", "job %s (on %s) is gone", k, m.compute)
		}
		if api.Terminal(m.status) && j.Status != m.status {
			return w.fail("no job lost", "job %s ended %s, now %s", k, m.status, j.Status)
		}
		switch j.Status {
		case api.JobQueued, api.JobPreparing:
		case api.JobRunning:
			if !running[j.ID] {
				return w.fail("no job lost", "job %s is Running on %v but none of its tasks runs", k, j.Nodes)
			}
		case api.JobCompleted:
			if j.ExitCode == nil || *j.ExitCode != 0 {
				return w.fail("no job lost", "job %s Completed without exit code 0 (%v)", k, j.ExitCode)
			}
		case api.JobFailed, api.JobCanceled:
			if j.ExitCode == nil && j.Error == "" {
				return w.fail("no job lost", "job %s %s with no exit code and no reason", k, j.Status)
			}
		default:
			return w.fail("no job lost", "job %s has unknown status %q", k, j.Status)
		}
		if _, exists := w.computes[m.ws+"/"+m.compute]; !exists && !api.Terminal(j.Status) {
			return w.fail("deleting a compute cancels its jobs", "job %s of deleted compute %s is %s", k, m.compute, j.Status)
		}
		if !api.Terminal(m.status) && api.Terminal(j.Status) {
			if c := w.computes[m.ws+"/"+m.compute]; c != nil && c.instance && now.After(c.lastActivity) {
				c.lastActivity = now // a job's end is activity on its instance
			}
		}
		m.status = j.Status
	}

	if err := w.checkSchedules(jobs); err != nil {
		return err
	}
	if err := w.checkPipelines(byKey); err != nil {
		return err
	}

	// The engine holds exactly the computes the harness created and did not delete.
	w.checks++
	for _, k := range sortedKeys(w.computes) {
		if _, ok := computes[k]; !ok {
			return w.fail("computes persist", "compute %s is gone", k)
		}
	}
	for _, k := range sortedKeys(computes) {
		if _, ok := w.computes[k]; !ok {
			return w.fail("computes persist", "compute %s exists but was never created (or was deleted)", k)
		}
	}

	// Quotas held.
	w.checks++
	for _, ws := range workspaces {
		var used int64
		for _, k := range sortedKeys(computes) {
			c := computes[k]
			if c.Workspace != ws.name {
				continue
			}
			if c.ScaleSettings != nil && c.Instance == nil {
				used += c.ScaleSettings.MaxNodeCount * vCPUs
			} else {
				used += vCPUs
			}
		}
		if used > ws.quota || used < 0 {
			return w.fail("quotas held", "workspace %s uses %d vCPUs of %s, quota %d", ws.name, used, w.family, ws.quota)
		}
	}

	// GPUs (DESIGN 4): no GPU is held by two nodes or lies outside the machine; a node that
	// is up holds its size's one GPU; no node waits for a GPU while one is free.
	if len(w.gpus) > 0 {
		w.checks++
		holder := map[string]string{}
		var waiting []string
		for _, k := range sortedKeys(computes) {
			for _, n := range computes[k].Nodes {
				for _, g := range n.GPUs {
					if !slices.Contains(w.gpus, g) {
						return w.fail("GPUs held by one node", "node %s holds %s, not a GPU of the machine %v", n.ID, g, w.gpus)
					}
					if other, held := holder[g]; held {
						return w.fail("GPUs held by one node", "GPU %s is held by nodes %s and %s", g, other, n.ID)
					}
					holder[g] = n.ID
				}
				switch {
				case (n.State == api.NodeIdle || n.State == api.NodeRunning) && len(n.GPUs) != 1:
					return w.fail("GPUs held by one node", "node %s is %s with GPUs %v; its size has one", n.ID, n.State, n.GPUs)
				case n.State == api.NodePreparing && len(n.GPUs) == 0:
					waiting = append(waiting, n.ID)
				}
			}
		}
		if len(waiting) > 0 && len(holder) < len(w.gpus) {
			return w.fail("a waiting node gets a freed GPU", "nodes %v wait while %d of %d GPUs are free", waiting, len(w.gpus)-len(holder), len(w.gpus))
		}
	}

	// Nothing leaked: the driver's nodes are exactly the engine's nodes that hold one.
	w.checks++
	live := map[string]bool{}
	for _, key := range w.drv.Nodes() {
		live[key] = true
	}
	recorded := map[string]string{}
	for _, k := range sortedKeys(computes) {
		for _, n := range computes[k].Nodes {
			recorded[n.ID] = n.State
			holds := n.State == api.NodeIdle || n.State == api.NodeRunning || n.State == api.NodeLeaving
			if holds && !live[n.ID] {
				return w.fail("nothing leaked", "node %s of %s is %s in the engine but has no driver node", n.ID, k, n.State)
			}
			if !holds && live[n.ID] {
				return w.fail("nothing leaked", "node %s of %s is %s in the engine but still has a driver node", n.ID, k, n.State)
			}
		}
	}
	for _, key := range w.drv.Nodes() {
		if _, ok := recorded[key]; !ok {
			spec, _ := w.drv.Node(key)
			return w.fail("nothing leaked", "driver node %s (owner %s) has no engine record", key, spec.Owner)
		}
	}

	for _, k := range sortedKeys(w.computes) {
		m, c := w.computes[k], computes[k]
		var err error
		if m.instance {
			err = w.checkInstance(m, c, jobs)
		} else {
			err = w.checkCluster(m, c, jobs)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *world) checkCluster(m *computeModel, c api.Compute, jobs []api.Job) error {
	now := w.now()
	ss := c.ScaleSettings
	if ss == nil || ss.MinNodeCount != m.min || ss.MaxNodeCount != m.max {
		return w.fail("settings persist", "cluster %s has %+v; the harness set min %d max %d", m.key(), ss, m.min, m.max)
	}
	var usable, alive, idle int64
	var expired int64
	for _, n := range c.Nodes {
		switch n.State {
		case api.NodeIdle:
			usable++
			alive++
			idle++
			if !now.Before(n.IdleSince.Add(m.idleAfter)) {
				expired++
			}
		case api.NodeRunning, api.NodePreparing:
			usable++
			alive++
		case api.NodePreempted:
			alive++ // waits for capacity like a preparing node
		}
	}
	// Max.
	w.checks++
	if usable > m.max {
		return w.fail("at most max_node_count usable nodes", "cluster %s has %d usable nodes (max %d): %s", m.key(), usable, m.max, nodeList(c))
	}
	// Min: a dead node is replaced.
	w.checks++
	if alive < m.min {
		return w.fail("at least min_node_count nodes", "cluster %s has %d nodes alive or preparing (min %d): %s", m.key(), alive, m.min, nodeList(c))
	}
	// Idle release: an idle node past its deadline stays only to keep min, or for a
	// waiting job that will take it.
	w.checks++
	var waiting int64
	for _, j := range jobs {
		if j.Workspace == m.ws && j.Compute == m.name && j.Status == api.JobQueued {
			waiting += j.Count
		}
	}
	releasable := min(expired-min(waiting, idle), alive-m.min)
	if releasable > 0 {
		return w.fail("idle nodes above min are released at their deadline", "cluster %s (min %d, idle after %s, %d nodes wanted by queued jobs) keeps %d idle nodes past their deadline: %s",
			m.key(), m.min, m.idleAfter, waiting, releasable, nodeList(c))
	}
	// Drains: a leaving node holds a job until it ends; one without a job is gone once settled.
	w.checks++
	for _, n := range c.Nodes {
		if n.State == api.NodeLeaving && n.JobID == "" {
			return w.fail("drained nodes leave", "cluster %s keeps leaving node %s with no job", m.key(), n.ID)
		}
	}
	return nil
}

func (w *world) checkInstance(m *computeModel, c api.Compute, jobs []api.Job) error {
	now := w.now()
	// A start (the instance coming up Running from another state) is activity.
	if c.State == api.InstanceRunning || c.State == api.InstanceJobRunning {
		if m.state != api.InstanceRunning && m.state != api.InstanceJobRunning && now.After(m.lastActivity) {
			m.lastActivity = now
		}
	} else if m.sessions > 0 {
		// Sessions end with the instance's node, and their close counts as activity.
		for ; m.sessions > 0; m.sessions-- {
			w.e.CloseSession(m.ws, m.name)
		}
		m.lastActivity = now
	}
	m.state = c.State

	busy := m.sessions > 0
	for _, j := range jobs {
		if j.Workspace == m.ws && j.Compute == m.name && !api.Terminal(j.Status) {
			busy = true
		}
	}
	deadline := m.lastActivity.Add(m.idleShutdown)

	// An idle-shutdown stop happens only once the idle deadline is reached, never while
	// a job or session keeps the instance busy.
	w.checks++
	if op := c.LastOperation; op != nil && *op != m.lastOp {
		if op.Trigger == api.TriggerIdleShutdown && op.Name == "Stop" && op.Time != m.lastOp.Time {
			if m.idleShutdown <= 0 || op.Time.Before(deadline) || m.sessions > 0 {
				return w.fail("an instance stops idle_time_before_shutdown after its last activity",
					"instance %s stopped by IdleShutdown at %s, but its idle deadline is %s (last activity %s, idle %s, %d sessions open)",
					m.key(), op.Time.Format("15:04:05.000"), deadline.Format("15:04:05.000"), m.lastActivity.Format("15:04:05.000"), m.idleShutdown, m.sessions)
			}
		}
		m.lastOp = *op
	}
	// A running instance with nothing to do stops at its deadline.
	w.checks++
	if c.State == api.InstanceRunning && m.idleShutdown > 0 && !busy && !now.Before(deadline) {
		return w.fail("an instance stops idle_time_before_shutdown after its last activity",
			"instance %s is still Running at %s, idle since %s with idle_time_before_shutdown %s (deadline %s)",
			m.key(), now.Format("15:04:05.000"), m.lastActivity.Format("15:04:05.000"), m.idleShutdown, deadline.Format("15:04:05.000"))
	}
	// One node at most.
	w.checks++
	var usable int
	for _, n := range c.Nodes {
		if n.State == api.NodeIdle || n.State == api.NodeRunning || n.State == api.NodePreparing {
			usable++
		}
	}
	if usable > 1 {
		return w.fail("an instance has one node", "instance %s has %d usable nodes: %s", m.key(), usable, nodeList(c))
	}
	return nil
}

func nodeList(c api.Compute) string {
	var parts []string
	for _, n := range c.Nodes {
		s := n.ID + ":" + n.State
		if n.JobID != "" {
			s += "(" + n.JobID + ")"
		}
		if n.State == api.NodeIdle {
			s += "@" + n.IdleSince.Format("15:04:05.000")
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	return "[" + strings.Join(parts, " ") + "]"
}
