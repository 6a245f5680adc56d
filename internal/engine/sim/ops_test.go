package sim

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// op is one kind of thing users and machines do, with its weight in the random mix.
type op struct {
	name   string
	weight int
	do     func(w *world) error
}

var ops = []op{
	{"create cluster", 6, (*world).createCluster},
	{"update cluster", 6, (*world).updateCluster},
	{"out-of-range scale settings", 1, (*world).badScaleSettings},
	{"delete compute", 3, (*world).deleteCompute},
	{"create instance", 4, (*world).createInstance},
	{"update instance", 3, (*world).updateInstance},
	{"submit job", 14, (*world).submitJob},
	{"cancel job", 3, (*world).cancelJob},
	{"submit pipeline", 4, (*world).submitPipeline},
	{"cancel pipeline", 1, (*world).cancelPipeline},
	{"kill node", 2, (*world).killNode},
	{"instance action", 6, (*world).instanceAction},
	{"open session", 3, (*world).openSession},
	{"close session", 3, (*world).closeSession},
	{"report activity", 3, (*world).reportActivity},
	{"move clock", 22, (*world).moveClock},
	{"restart engine", 2, (*world).restart},
	{"create schedule", 2, (*world).createSchedule},
	{"delete schedule", 1, (*world).deleteSchedule},
	{"engine down across ticks", 1, (*world).downtime},
}

var totalWeight = func() int {
	n := 0
	for _, o := range ops {
		n += o.weight
	}
	return n
}()

func (w *world) randomOp() error {
	n := w.rng.IntN(totalWeight)
	for _, o := range ops {
		if n < o.weight {
			if err := o.do(w); err != nil {
				return err
			}
			return w.settle()
		}
		n -= o.weight
	}
	panic("unreachable")
}

var (
	clusterNames  = []string{"cpu-a", "cpu-b", "cpu-c", "cpu-d"}
	instanceNames = []string{"box-a", "box-b", "box-c"}
	idleDurations = []string{"PT0S", "PT1S", "PT5S", "PT30S", "PT2M", "PT10M"}
	// instanceIdle are idle_time_before_shutdown values; "" is null (never).
	instanceIdle = []string{"", "PT1S", "PT3S", "PT30S", "PT2M", "PT15M"}
)

func (w *world) pickWS() string { return workspaces[w.rng.IntN(len(workspaces))].name }

func pick[T any](w *world, xs []T) T { return xs[w.rng.IntN(len(xs))] }

// pickCompute returns a compute the harness knows of, or nil when there is none.
func (w *world) pickCompute(instance bool) *computeModel {
	var cs []*computeModel
	for _, k := range sortedKeys(w.computes) {
		if c := w.computes[k]; c.instance == instance {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return pick(w, cs)
}

func (w *world) scaleSettings() (min, max int64, idle string) {
	max = 1 + w.rng.Int64N(5)
	min = w.rng.Int64N(3)
	if min > max && w.rng.IntN(2) == 0 {
		min = max
	}
	return min, max, pick(w, idleDurations)
}

func mustDuration(s string) time.Duration {
	d, err := validation.Duration("", s, 0, 7*24*time.Hour)
	if err != nil {
		panic(err)
	}
	return d
}

func (w *world) createCluster() error {
	ws, name := w.pickWS(), pick(w, clusterNames)
	min, max, idle := w.scaleSettings()
	prio := api.PriorityDedicated
	if w.rng.IntN(3) == 0 {
		prio = api.PriorityLowPriority
	}
	_, err := w.e.CreateCompute(context.Background(), ws, api.ComputeSpec{
		Name: name, VMSize: w.vmSize, VMPriority: prio,
		ScaleSettings: &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: max, ScaleDownNodesAfterIdleDuration: idle},
	}, "")
	w.logf("create cluster %s/%s min=%d max=%d idle=%s %s: %v", ws, name, min, max, idle, prio, err)
	if min > max && err == nil {
		return w.fail("invalid settings are refused", "cluster %s/%s created with min %d > max %d", ws, name, min, max)
	}
	if err == nil {
		w.computes[ws+"/"+name] = &computeModel{ws: ws, name: name, min: min, max: max, idleAfter: mustDuration(idle)}
	}
	return nil
}

func (w *world) updateCluster() error {
	c := w.pickCompute(false)
	if c == nil {
		return w.createCluster()
	}
	min, max, idle := w.scaleSettings()
	switch w.rng.IntN(3) { // often move one setting only, up or down
	case 0:
		min = c.min
	case 1:
		max = c.max
	}
	_, err := w.e.UpdateCompute(context.Background(), c.ws, c.name, api.ComputeUpdate{
		ScaleSettings: &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: max, ScaleDownNodesAfterIdleDuration: idle},
	})
	w.logf("update cluster %s min=%d max=%d idle=%s: %v", c.key(), min, max, idle, err)
	if min > max && err == nil {
		return w.fail("invalid settings are refused", "cluster %s updated to min %d > max %d", c.key(), min, max)
	}
	if err == nil {
		c.min, c.max, c.idleAfter = min, max, mustDuration(idle)
	}
	return nil
}

// badScaleSettings proposes node counts outside the documented bounds (negative, above
// validation.MaxNodeCount, near 2^62); the API must refuse them as invalid input.
func (w *world) badScaleSettings() error {
	huge := []int64{-1, validation.MaxNodeCount + 1, 1 << 40, 1 << 61, 1<<62 - 1, 1 << 62}
	var min, max int64 // min stays 0 where only max is out of range
	switch w.rng.IntN(3) {
	case 0:
		min = pick(w, huge)
		max = min + 1
		if min < 0 {
			max = 2
		}
	case 1:
		max = pick(w, huge)
		if max < 0 {
			max = 0
		}
	default:
		min, max = pick(w, huge), pick(w, huge)
	}
	ss := &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: max}
	var err error
	target := ""
	if c := w.pickCompute(false); c != nil && w.rng.IntN(2) == 0 {
		target = "update " + c.key()
		_, err = w.e.UpdateCompute(context.Background(), c.ws, c.name, api.ComputeUpdate{ScaleSettings: ss})
	} else {
		ws := w.pickWS()
		target = "create " + ws + "/huge"
		_, err = w.e.CreateCompute(context.Background(), ws, api.ComputeSpec{Name: "huge", VMSize: w.vmSize, ScaleSettings: ss}, "")
	}
	w.logf("%s with out-of-range min=%d max=%d: %v", target, min, max, err)
	if !api.IsInvalid(err) {
		return w.fail("node counts are bounded", "%s with min_node_count %d, max_node_count %d was not refused as invalid (err: %v); bound is %d",
			target, min, max, err, validation.MaxNodeCount)
	}
	return nil
}

func (w *world) createInstance() error {
	ws, name := w.pickWS(), pick(w, instanceNames)
	idle := pick(w, instanceIdle)
	_, err := w.e.CreateCompute(context.Background(), ws, api.ComputeSpec{
		Name: name, Type: api.TypeComputeInstance, VMSize: w.vmSize,
		Instance: &api.InstanceSettings{IdleTimeBeforeShutdown: idle},
	}, "")
	w.logf("create instance %s/%s idle=%q: %v", ws, name, idle, err)
	if err == nil {
		var d time.Duration
		if idle != "" {
			d = mustDuration(idle)
		}
		w.computes[ws+"/"+name] = &computeModel{ws: ws, name: name, instance: true, min: 1, max: 1,
			idleShutdown: d, lastActivity: w.now(), state: api.InstanceCreating}
	}
	return nil
}

func (w *world) updateInstance() error {
	c := w.pickCompute(true)
	if c == nil {
		return w.createInstance()
	}
	idle := pick(w, instanceIdle)
	// The idle clock as DESIGN 4 spells it: shortening the setting to or below the current
	// idle time resets it (a busy instance has no idle time).
	busy := c.sessions > 0 || w.instanceBusy(c)
	_, err := w.e.UpdateCompute(context.Background(), c.ws, c.name, api.ComputeUpdate{Instance: &api.InstanceSettings{IdleTimeBeforeShutdown: idle}})
	w.logf("update instance %s idle=%q: %v", c.key(), idle, err)
	if err != nil {
		return nil
	}
	var d time.Duration
	if idle != "" {
		d = mustDuration(idle)
	}
	shortened := d > 0 && (c.idleShutdown <= 0 || d < c.idleShutdown)
	if shortened && !busy && w.now().Sub(c.lastActivity) >= d {
		c.lastActivity = w.now()
	}
	c.idleShutdown = d
	return nil
}

// instanceBusy reports whether a job the harness submitted runs on the instance.
func (w *world) instanceBusy(c *computeModel) bool {
	cur, err := w.e.GetCompute(context.Background(), c.ws, c.name)
	return err == nil && cur.State == api.InstanceJobRunning
}

func (w *world) deleteCompute() error {
	c := w.pickCompute(w.rng.IntN(3) == 0)
	if c == nil {
		return nil
	}
	err := w.e.DeleteCompute(context.Background(), c.ws, c.name)
	w.logf("delete compute %s: %v", c.key(), err)
	if err != nil {
		return nil
	}
	// DESIGN 4: a delete returns only once every node is confirmed released.
	if _, gerr := w.e.GetCompute(context.Background(), c.ws, c.name); !api.IsNotFound(gerr) {
		return w.fail("delete returns once nodes are released", "GetCompute(%s) after delete: %v", c.key(), gerr)
	}
	for _, key := range w.drv.Nodes() {
		if spec, ok := w.drv.Node(key); ok && spec.Owner == c.key() {
			return w.fail("nothing leaked", "deleted compute %s still has driver node %s", c.key(), key)
		}
	}
	// Sessions end with the instance's node.
	for ; c.sessions > 0; c.sessions-- {
		w.e.CloseSession(c.ws, c.name)
	}
	delete(w.computes, c.key())
	return nil
}

func (w *world) submitJob() error {
	c := w.pickCompute(w.rng.IntN(4) == 0)
	if c == nil {
		return w.createCluster()
	}
	count := int64(1)
	if !c.instance && c.max > 1 {
		count = 1 + w.rng.Int64N(c.max)
	}
	// A third of the jobs have a limits.timeout, held by the "a job stops at its limit"
	// invariant.
	var timeout int64
	if w.rng.IntN(3) == 0 {
		timeout = 30 + w.rng.Int64N(600)
	}
	j, err := w.e.SubmitJob(context.Background(), c.ws, api.JobSpec{Compute: c.name, InstanceCount: count, Command: []string{"train"}, TimeoutSeconds: timeout}, "")
	if err != nil {
		w.logf("submit job to %s count=%d: %v", c.key(), count, err)
		return nil
	}
	w.logf("submit job %s to %s count=%d", j.ID, c.key(), count)
	k := c.ws + "/" + j.ID
	w.jobs[k] = &jobModel{ws: c.ws, id: j.ID, compute: c.name, status: j.Status}
	w.jobOrder = append(w.jobOrder, k)
	return nil
}

// activeJob returns a job the harness last saw not finished, or nil.
func (w *world) activeJob() *jobModel {
	var active []*jobModel
	for _, k := range w.jobOrder {
		if j := w.jobs[k]; !api.Terminal(j.status) {
			active = append(active, j)
		}
	}
	if len(active) == 0 {
		return nil
	}
	return pick(w, active)
}

func (w *world) cancelJob() error {
	j := w.activeJob()
	if j == nil {
		return nil
	}
	_, err := w.e.CancelJob(context.Background(), j.ws, j.id)
	w.logf("cancel job %s: %v", j.id, err)
	return nil
}

func (w *world) killNode() error {
	// Nodes in an order that does not depend on their random IDs: by owner, then by the
	// task they run (idle nodes of one compute can still tie).
	task := map[string]string{}
	for _, nt := range w.drv.RunningTasks() {
		n, t, _ := strings.Cut(nt, "/")
		task[n] = t
	}
	nodes := w.drv.Nodes()
	if len(nodes) == 0 {
		return nil
	}
	owner := func(k string) string { s, _ := w.drv.Node(k); return s.Owner + "/" + task[k] }
	slices.SortStableFunc(nodes, func(a, b string) int { return strings.Compare(owner(a), owner(b)) })
	key := pick(w, nodes)
	spec, _ := w.drv.Node(key)
	w.logf("machine: node %s of %s dies", key, spec.Owner)
	w.drv.KillNode(key)
	// A dead instance node is replaced by a fresh one, which counts as a start.
	if c := w.computes[spec.Owner]; c != nil && c.instance {
		c.lastActivity = w.now()
	}
	return nil
}

func (w *world) instanceAction() error {
	c := w.pickCompute(true)
	if w.rng.IntN(2) == 0 { // most interesting on a running instance
		var up []*computeModel
		for _, k := range sortedKeys(w.computes) {
			if m := w.computes[k]; m.instance && (m.state == api.InstanceRunning || m.state == api.InstanceJobRunning) {
				up = append(up, m)
			}
		}
		if len(up) > 0 {
			c = pick(w, up)
		}
	}
	if c == nil {
		return w.createInstance()
	}
	action := pick(w, []string{api.ActionStart, api.ActionStart, api.ActionStop, api.ActionRestart})
	before, _ := w.e.GetCompute(context.Background(), c.ws, c.name)
	_, err := w.e.InstanceAction(context.Background(), c.ws, c.name, action)
	w.logf("instance %s %s: %v", action, c.key(), err)
	if err != nil {
		return nil
	}
	if action != api.ActionStop {
		c.lastActivity = w.now() // a user's start (or a restart's fresh node) restarts the idle clock
	}
	if action == api.ActionStart && before != nil && (before.State == api.InstanceRunning || before.State == api.InstanceJobRunning) {
		// A user's start of a running instance never stops it.
		if err := w.e.Settle(context.Background()); err != nil {
			return w.fail("the engine settles", "Settle: %v", err)
		}
		after, err := w.e.GetCompute(context.Background(), c.ws, c.name)
		if err != nil {
			return w.fail("start keeps a running instance up", "GetCompute(%s): %v", c.key(), err)
		}
		if after.State != api.InstanceRunning && after.State != api.InstanceJobRunning {
			return w.fail("start keeps a running instance up", "start of running %s left it %s (last operation %+v)", c.key(), after.State, *after.LastOperation)
		}
	}
	return nil
}

func (w *world) openSession() error {
	c := w.pickCompute(true)
	if c == nil || (c.state != api.InstanceRunning && c.state != api.InstanceJobRunning) {
		return nil
	}
	w.e.OpenSession(c.ws, c.name)
	c.sessions++
	w.logf("session opens on %s (%d open)", c.key(), c.sessions)
	return nil
}

func (w *world) closeSession() error {
	var open []*computeModel
	for _, k := range sortedKeys(w.computes) {
		if c := w.computes[k]; c.sessions > 0 {
			open = append(open, c)
		}
	}
	if len(open) == 0 {
		return nil
	}
	c := pick(w, open)
	w.e.CloseSession(c.ws, c.name)
	c.sessions--
	c.lastActivity = w.now()
	w.logf("session closes on %s (%d open)", c.key(), c.sessions)
	return nil
}

func (w *world) reportActivity() error {
	c := w.pickCompute(true)
	if c == nil {
		return nil
	}
	err := w.e.ReportActivity(context.Background(), c.ws, c.name)
	w.logf("activity reported on %s: %v", c.key(), err)
	if err == nil {
		c.lastActivity = w.now()
	}
	return nil
}

// restart crashes the engine and starts a new one on the same store and driver. Sessions
// die with the engine (their connections end with it) without counting as activity.
func (w *world) restart() error {
	w.logf("engine restarts")
	w.crash()
	w.drv.Reopen()
	if err := w.start(); err != nil {
		return w.fail("the engine restarts from its store", "%v", err)
	}
	for _, c := range w.computes {
		c.sessions = 0
	}
	return nil
}

// moveClock moves the fake clock by a random length (milliseconds to hours) or exactly to a
// deadline the harness knows of (a task's end, a node's or instance's idle deadline), or
// just before or after one. Tasks end at their planned times on the way, each end followed
// by a settle and the checks.
func (w *world) moveClock() error {
	now := w.now()
	var target time.Time
	deadlines := w.deadlines()
	switch r := w.rng.IntN(10); {
	case r < 3 || len(deadlines) == 0:
		// 1ms to 3h, mostly seconds and minutes: hour-long moves end most idle periods.
		units := []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond,
			time.Second, time.Second, 10 * time.Second, 10 * time.Second, time.Minute, time.Minute, 10 * time.Minute, time.Hour}
		target = now.Add(time.Duration(1+w.rng.IntN(3)) * pick(w, units))
	default:
		d := deadlines[0] // the soonest, or any
		if w.rng.IntN(2) == 0 {
			d = pick(w, deadlines)
		}
		switch r {
		case 7: // somewhere before it
			d = now.Add(time.Duration(w.rng.Int64N(int64(d.Sub(now)) + 1)))
		case 8:
			d = d.Add(-time.Millisecond)
		case 9:
			d = d.Add(time.Nanosecond)
		}
		target = d
		if !target.After(now) {
			target = now.Add(time.Millisecond)
		}
	}
	w.logf("clock moves by %s", target.Sub(now))
	for w.now().Before(target) {
		next := target
		for _, p := range w.tasks {
			if p.end.After(w.now()) && p.end.Before(next) {
				next = p.end
			}
		}
		for _, t := range w.scheduleTicks() {
			if t.Before(next) {
				next = t
			}
		}
		w.clk.SetTime(next)
		if next.Before(target) {
			if err := w.settle(); err != nil {
				return err
			}
		}
	}
	return nil
}

// deadlines lists the times at which something is due: task ends, idle deadlines of nodes
// and instances.
func (w *world) deadlines() []time.Time {
	now := w.now()
	var out []time.Time
	for _, k := range sortedKeys(w.tasks) {
		out = append(out, w.tasks[k].end)
	}
	for _, k := range sortedKeys(w.computes) {
		c := w.computes[k]
		if c.instance {
			if c.idleShutdown > 0 {
				out = append(out, c.lastActivity.Add(c.idleShutdown))
			}
			continue
		}
		cur, err := w.e.GetCompute(context.Background(), c.ws, c.name)
		if err != nil {
			continue
		}
		for _, n := range cur.Nodes {
			if n.State == api.NodeIdle {
				out = append(out, n.IdleSince.Add(c.idleAfter))
			}
		}
	}
	out = slices.DeleteFunc(out, func(t time.Time) bool { return !t.After(now) })
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}
