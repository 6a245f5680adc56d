package cluster

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

var now = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// Node and job builders; durations are how long ago.

func idle(id string, ago time.Duration) Node {
	return Node{ID: id, State: api.NodeIdle, IdleSince: now.Add(-ago)}
}
func running(id, job string) Node { return Node{ID: id, State: api.NodeRunning, JobID: job} }
func preparing(id string) Node    { return Node{ID: id, State: api.NodePreparing} }
func preempted(id string) Node    { return Node{ID: id, State: api.NodePreempted} }
func unusable(id string) Node     { return Node{ID: id, State: api.NodeUnusable} }
func leaving(id, job string) Node { return Node{ID: id, State: api.NodeLeaving, JobID: job} }
func queued(id string, count int64, ago time.Duration) Job {
	return Job{ID: id, Status: api.JobQueued, Count: count, SubmittedAt: now.Add(-ago)}
}

type decideCase struct {
	name    string
	cluster Cluster
	nodes   []Node
	jobs    []Job
	at      time.Time // zero means now
	want    Plan
}

// run checks each case, and that the plan does not depend on the input order.
func run(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at := tc.at
			if at.IsZero() {
				at = now
			}
			got := Decide(tc.cluster, tc.nodes, tc.jobs, at)
			if !samePlan(got, tc.want) {
				t.Fatalf("Decide =\n  %s\nwant\n  %s", show(got), show(tc.want))
			}
			nodes, jobs := slices.Clone(tc.nodes), slices.Clone(tc.jobs)
			slices.Reverse(nodes)
			slices.Reverse(jobs)
			if again := Decide(tc.cluster, nodes, jobs, at); !samePlan(again, got) {
				t.Fatalf("reversed input: Decide =\n  %s\nwant\n  %s", show(again), show(got))
			}
		})
	}
}

func samePlan(a, b Plan) bool {
	norm := func(p Plan) Plan {
		if len(p.Release) == 0 {
			p.Release = nil
		}
		if len(p.Drain) == 0 {
			p.Drain = nil
		}
		if len(p.Assign) == 0 {
			p.Assign = nil
		}
		if len(p.Unplaceable) == 0 {
			p.Unplaceable = nil
		}
		if len(p.Deadlines) == 0 {
			p.Deadlines = nil
		}
		return p
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func show(p Plan) string {
	dl := map[string]string{}
	for id, d := range p.Deadlines {
		dl[id] = d.Sub(now).String()
	}
	return fmt.Sprintf("create=%d release=%v drain=%v assign=%v unplaceable=%v deadlines(from now)=%v target=%d",
		p.Create, p.Release, p.Drain, p.Assign, p.Unplaceable, dl, p.Target)
}

func TestKeepsMinNodes(t *testing.T) {
	run(t, []decideCase{{
		name:    "empty cluster starts min nodes",
		cluster: Cluster{Min: 2, Max: 4, IdleAfter: time.Minute},
		want:    Plan{Create: 2, Target: 2},
	}, {
		name:    "nodes on the way count",
		cluster: Cluster{Min: 3, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{preparing("a"), preempted("b"), running("c", "j")},
		want:    Plan{Target: 3},
	}, {
		name:    "idle nodes at min stay however long they idle",
		cluster: Cluster{Min: 2, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", 24*time.Hour), idle("b", time.Hour)},
		want:    Plan{Target: 2},
	}, {
		name:    "busy nodes count toward min",
		cluster: Cluster{Min: 2, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{running("a", "j"), idle("b", time.Hour), idle("c", time.Hour)},
		want:    Plan{Release: []string{"b"}, Target: 2},
	}})
}

func TestMinProtectsMostRecentlyIdle(t *testing.T) {
	run(t, []decideCase{{
		name:    "longest idle leaves first",
		cluster: Cluster{Min: 1, Max: 5, IdleAfter: 10 * time.Minute},
		nodes:   []Node{idle("a", 30*time.Minute), idle("b", 5*time.Minute), idle("c", 20*time.Minute)},
		want: Plan{
			Release:   []string{"a", "c"},
			Target:    1,
			Deadlines: nil, // b is protected: it has no deadline
		},
	}, {
		name:    "protected node is the most recent one, others wait for their deadline",
		cluster: Cluster{Min: 1, Max: 5, IdleAfter: 10 * time.Minute},
		nodes:   []Node{idle("a", 3*time.Minute), idle("b", 1*time.Minute), idle("c", 2*time.Minute)},
		want: Plan{
			Deadlines: map[string]time.Time{"a": now.Add(7 * time.Minute), "c": now.Add(8 * time.Minute)},
			Target:    3,
		},
	}, {
		name:    "equal idle times: the highest ID is protected",
		cluster: Cluster{Min: 1, Max: 5, IdleAfter: 0},
		nodes:   []Node{idle("b", time.Minute), idle("a", time.Minute)},
		want:    Plan{Release: []string{"a"}, Target: 1},
	}})
}

func TestReplacesDeadNode(t *testing.T) {
	run(t, []decideCase{{
		name:    "dead node below min is released and replaced",
		cluster: Cluster{Min: 2, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", time.Hour), unusable("b")},
		want:    Plan{Create: 1, Release: []string{"b"}, Target: 2},
	}, {
		name:    "dead node above min is released, not replaced",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{running("a", "j"), unusable("b")},
		want:    Plan{Release: []string{"b"}, Target: 1},
	}, {
		name:    "dead nodes do not count toward max",
		cluster: Cluster{Min: 0, Max: 2, IdleAfter: time.Minute},
		nodes:   []Node{unusable("a"), unusable("b")},
		jobs:    []Job{queued("j", 2, time.Second)},
		want:    Plan{Create: 2, Release: []string{"a", "b"}, Target: 2},
	}})
}

func TestNeverExceedsMax(t *testing.T) {
	run(t, []decideCase{{
		name:    "work asks for more than max",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{running("a", "j0"), running("b", "j0")},
		jobs:    []Job{queued("j1", 3, 2*time.Second), queued("j2", 4, time.Second)},
		want:    Plan{Create: 2, Target: 4},
	}, {
		name:    "preparing and preempted nodes count toward max",
		cluster: Cluster{Min: 0, Max: 3, IdleAfter: time.Minute},
		nodes:   []Node{preparing("a"), preempted("b")},
		jobs:    []Job{queued("j1", 3, time.Second)},
		want:    Plan{Create: 1, Target: 3},
	}, {
		name:    "at max nothing is created",
		cluster: Cluster{Min: 0, Max: 2, IdleAfter: time.Minute},
		nodes:   []Node{running("a", "j0"), running("b", "j0")},
		jobs:    []Job{queued("j1", 1, time.Second)},
		want:    Plan{Target: 2},
	}, {
		name:    "leaving nodes do not count",
		cluster: Cluster{Min: 0, Max: 2, IdleAfter: time.Minute},
		nodes:   []Node{leaving("a", "j0"), running("b", "j0")},
		jobs:    []Job{queued("j1", 1, time.Second)},
		want:    Plan{Create: 1, Target: 2},
	}})
}

func TestScalesUpAtOnceForQueuedWork(t *testing.T) {
	run(t, []decideCase{{
		name:    "empty cluster",
		cluster: Cluster{Min: 0, Max: 10, IdleAfter: time.Minute},
		jobs:    []Job{queued("j1", 3, time.Second)},
		want:    Plan{Create: 3, Target: 3},
	}, {
		name:    "idle node is used at once",
		cluster: Cluster{Min: 0, Max: 10, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", time.Second)},
		jobs:    []Job{queued("j1", 1, time.Second)},
		want:    Plan{Assign: map[string][]string{"j1": {"a"}}, Target: 1},
	}, {
		name:    "nodes on the way are not asked for twice",
		cluster: Cluster{Min: 0, Max: 10, IdleAfter: time.Minute},
		nodes:   []Node{preparing("a"), idle("b", time.Second)},
		jobs:    []Job{queued("j1", 3, time.Second)},
		want:    Plan{Create: 1, Target: 3},
	}, {
		name:    "every waiting job is provided for, not only the first",
		cluster: Cluster{Min: 0, Max: 10, IdleAfter: time.Minute},
		jobs:    []Job{queued("j1", 3, 2*time.Second), queued("j2", 2, time.Second)},
		want:    Plan{Create: 5, Target: 5},
	}, {
		name:    "min and work share the new nodes",
		cluster: Cluster{Min: 2, Max: 10, IdleAfter: time.Minute},
		jobs:    []Job{queued("j1", 1, time.Second)},
		want:    Plan{Create: 2, Target: 2},
	}, {
		name:    "jobs that are not queued need nothing",
		cluster: Cluster{Min: 0, Max: 10, IdleAfter: time.Minute},
		jobs: []Job{
			{ID: "r", Status: api.JobRunning, Count: 2},
			{ID: "c", Status: api.JobCompleted, Count: 2},
			{ID: "p", Status: api.JobPreparing, Count: 2},
		},
		want: Plan{},
	}, {
		name:    "count below 1 means 1",
		cluster: Cluster{Min: 0, Max: 10, IdleAfter: time.Minute},
		jobs:    []Job{queued("j1", 0, time.Second)},
		want:    Plan{Create: 1, Target: 1},
	}})
}

func TestReleasesIdleNodeAtDeadline(t *testing.T) {
	c := Cluster{Min: 0, Max: 4, IdleAfter: 2 * time.Minute}
	since := now.Add(-time.Hour)
	deadline := since.Add(2 * time.Minute)
	nodes := []Node{{ID: "a", State: api.NodeIdle, IdleSince: since}}
	run(t, []decideCase{{
		name:    "1ns before the deadline",
		cluster: c, nodes: nodes, at: deadline.Add(-time.Nanosecond),
		want: Plan{Deadlines: map[string]time.Time{"a": deadline}, Target: 1},
	}, {
		name:    "at the deadline",
		cluster: c, nodes: nodes, at: deadline,
		want: Plan{Release: []string{"a"}},
	}, {
		name:    "after the deadline",
		cluster: c, nodes: nodes, at: deadline.Add(time.Hour),
		want: Plan{Release: []string{"a"}},
	}, {
		name:    "zero idle duration releases at once",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: 0},
		nodes:   []Node{idle("a", 0)},
		want:    Plan{Release: []string{"a"}},
	}, {
		name:    "running nodes never idle out",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: 0},
		nodes:   []Node{running("a", "j"), {ID: "b", State: api.NodeIdle, JobID: "j2"}},
		want:    Plan{Target: 2},
	}})
}

func TestDrainsWhenMaxLowered(t *testing.T) {
	run(t, []decideCase{{
		name:    "idle beyond max go at once, longest idle first, then busy ones drain",
		cluster: Cluster{Min: 0, Max: 2, IdleAfter: time.Hour},
		nodes: []Node{
			idle("i1", time.Minute), idle("i2", 2*time.Minute),
			running("r1", "j1"), running("r2", "j1"), running("r3", "j2"),
		},
		want: Plan{Release: []string{"i2", "i1"}, Drain: []string{"r3"}, Target: 2},
	}, {
		name:    "preempted and preparing nodes go before idle ones",
		cluster: Cluster{Min: 0, Max: 2, IdleAfter: time.Hour},
		nodes:   []Node{idle("i1", time.Minute), preparing("p1"), preparing("p2"), preempted("x1"), running("r1", "j")},
		want:    Plan{Release: []string{"x1", "p2", "p1"}, Deadlines: map[string]time.Time{"i1": now.Add(59 * time.Minute)}, Target: 2},
	}, {
		name:    "drained nodes wait for their job",
		cluster: Cluster{Min: 0, Max: 1, IdleAfter: time.Hour},
		nodes:   []Node{running("r1", "j1"), leaving("r2", "j1")},
		want:    Plan{Target: 1},
	}, {
		name:    "drained node whose job ended is released",
		cluster: Cluster{Min: 0, Max: 1, IdleAfter: time.Hour},
		nodes:   []Node{idle("r1", 0), leaving("r2", "")},
		want:    Plan{Release: []string{"r2"}, Deadlines: map[string]time.Time{"r1": now.Add(time.Hour)}, Target: 1},
	}, {
		name:    "leaving nodes get no work",
		cluster: Cluster{Min: 0, Max: 1, IdleAfter: time.Hour},
		nodes:   []Node{leaving("a", "j0"), running("b", "j0")},
		jobs:    []Job{queued("j1", 1, time.Second)},
		want:    Plan{Target: 1},
	}, {
		name:    "max lowered below min: max wins",
		cluster: Cluster{Min: 3, Max: 1, IdleAfter: time.Hour},
		nodes:   []Node{idle("a", time.Minute), idle("b", time.Second)},
		want:    Plan{Release: []string{"a"}, Target: 1},
	}})
}

func TestMultiNodeJobWaitsForAllNodes(t *testing.T) {
	run(t, []decideCase{{
		name:    "two idle nodes are not enough for three: they wait, reserved",
		cluster: Cluster{Min: 0, Max: 3, IdleAfter: 0},
		nodes:   []Node{idle("a", time.Hour), idle("b", time.Hour), running("c", "j0")},
		jobs:    []Job{queued("j1", 3, time.Second)},
		want:    Plan{Target: 3},
	}, {
		name:    "all nodes present: the job takes them together, longest idle first",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", 1*time.Second), idle("b", 3*time.Second), idle("c", 2*time.Second), idle("d", 0)},
		jobs:    []Job{queued("j1", 3, time.Second)},
		want: Plan{
			Assign:    map[string][]string{"j1": {"b", "c", "a"}},
			Deadlines: map[string]time.Time{"d": now.Add(time.Minute)},
			Target:    4,
		},
	}, {
		name:    "missing nodes are created while the others wait",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", time.Hour)},
		jobs:    []Job{queued("j1", 3, time.Second)},
		want:    Plan{Create: 2, Target: 3},
	}})
}

func TestStrictFIFO(t *testing.T) {
	run(t, []decideCase{{
		name:    "a small job waits behind a big one",
		cluster: Cluster{Min: 0, Max: 3, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", time.Second), running("b", "j0"), running("c", "j0")},
		jobs:    []Job{queued("big", 3, 2*time.Second), queued("small", 1, time.Second)},
		want:    Plan{Target: 3},
	}, {
		name:    "jobs start in submit order",
		cluster: Cluster{Min: 0, Max: 3, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", time.Second), idle("b", time.Second)},
		jobs:    []Job{queued("late", 1, time.Second), queued("early", 1, time.Minute), queued("last", 2, 0)},
		want: Plan{
			Assign: map[string][]string{"early": {"a"}, "late": {"b"}},
			Create: 1, // 2 for "last", within max 3 (2 live)
			Target: 3,
		},
	}, {
		name:    "equal submit times: ID order",
		cluster: Cluster{Min: 0, Max: 1, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", time.Second)},
		jobs:    []Job{queued("j2", 1, time.Second), queued("j1", 1, time.Second)},
		want:    Plan{Assign: map[string][]string{"j1": {"a"}}, Target: 1},
	}})
}

func TestUnplaceableJob(t *testing.T) {
	run(t, []decideCase{{
		name:    "too big for max, and it blocks nobody",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{idle("a", time.Second)},
		jobs:    []Job{queued("huge", 5, 2*time.Second), queued("small", 1, time.Second)},
		want:    Plan{Unplaceable: []string{"huge"}, Assign: map[string][]string{"small": {"a"}}, Target: 1},
	}, {
		name:    "exactly max fits",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: time.Minute},
		jobs:    []Job{queued("j", 4, time.Second)},
		want:    Plan{Create: 4, Target: 4},
	}})
}

func TestJobHeldByNodesIsLeftAlone(t *testing.T) {
	// The engine recorded the assignment but had not yet moved the job out of Queued.
	run(t, []decideCase{{
		name:    "no second placement, no scale-up",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{running("a", "j1"), idle("b", 0)},
		jobs:    []Job{queued("j1", 1, time.Second)},
		want:    Plan{Deadlines: map[string]time.Time{"b": now.Add(time.Minute)}, Target: 2},
	}})
}

func TestDuplicateRecordsCountOnce(t *testing.T) {
	run(t, []decideCase{{
		name:    "duplicate node and job",
		cluster: Cluster{Min: 0, Max: 4, IdleAfter: time.Minute},
		nodes:   []Node{preparing("a"), preparing("a")},
		jobs:    []Job{queued("j", 2, time.Second), queued("j", 2, time.Second)},
		want:    Plan{Create: 1, Target: 2},
	}})
}

// sim is a cluster under test: the engine's effects of a plan, and the outside events
// (nodes coming up or dying, jobs arriving and ending, time passing, settings changing).
type sim struct {
	t     *testing.T
	rng   *rand.Rand
	stats map[string]int
	c     Cluster
	now   time.Time
	nodes map[string]*Node
	jobs  map[string]*Job
	seq   int
	log   []string
}

func (s *sim) nodeList() []Node {
	out := make([]Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, *n)
	}
	return out
}

func (s *sim) jobList() []Job {
	out := make([]Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, *j)
	}
	return out
}

func (s *sim) decide() Plan { return Decide(s.c, s.nodeList(), s.jobList(), s.now) }

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\nsettings %+v at +%s\nlast events: %v", fmt.Sprintf(format, args...), s.c, s.now.Sub(now), s.log[max(0, len(s.log)-8):])
}

// count returns live nodes, the idle ones, and those on the way.
func (s *sim) count() (live, idleN, onTheWay int64) {
	for _, n := range s.nodes {
		switch {
		case n.State == api.NodeLeaving || n.State == api.NodeUnusable:
		case n.State == api.NodeIdle && n.JobID == "":
			live++
			idleN++
		case n.State == api.NodePreparing || n.State == api.NodePreempted:
			live++
			onTheWay++
		default:
			live++
		}
	}
	return live, idleN, onTheWay
}

// waiting returns the queued jobs that can run, in FIFO order.
func (s *sim) waiting() []Job {
	var out []Job
	for _, j := range s.jobs {
		if j.Status == api.JobQueued && max(j.Count, 1) <= s.c.Max {
			out = append(out, *j)
		}
	}
	slices.SortFunc(out, func(a, b Job) int {
		if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
			return c
		}
		return cmpString(a.ID, b.ID)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkPlan checks a plan against the state it was decided from.
func (s *sim) checkPlan(p Plan) {
	s.t.Helper()
	used := map[string]string{}
	use := func(id, why string) *Node {
		n, ok := s.nodes[id]
		if !ok {
			s.fail("%s of unknown node %s", why, id)
		}
		if prev, dup := used[id]; dup {
			s.fail("node %s in %s and %s", id, prev, why)
		}
		used[id] = why
		return n
	}
	live, _, _ := s.count()
	for _, id := range p.Release {
		n := use(id, "release")
		if n.JobID != "" || n.State == api.NodeRunning {
			s.fail("release of busy node %+v", *n)
		}
		if n.State == api.NodeIdle && live <= s.c.Max && s.now.Before(n.IdleSince.Add(s.c.IdleAfter)) {
			s.fail("idle node %s released %s before its deadline", id, n.IdleSince.Add(s.c.IdleAfter).Sub(s.now))
		}
	}
	for _, id := range p.Drain {
		if n := use(id, "drain"); n.JobID == "" && n.State != api.NodeRunning || n.State == api.NodeLeaving {
			s.fail("drain of node %+v", *n)
		}
	}
	if len(p.Drain) > 0 && live <= s.c.Max {
		s.fail("drain within max")
	}
	for _, id := range p.Unplaceable {
		if j := s.jobs[id]; j == nil || j.Status != api.JobQueued || max(j.Count, 1) <= s.c.Max {
			s.fail("unplaceable job %+v", j)
		}
	}
	waiting := s.waiting()
	prefix := true
	for _, j := range waiting {
		ids, ok := p.Assign[j.ID]
		if ok && !prefix {
			s.fail("job %s started before an earlier one (strict FIFO)", j.ID)
		}
		prefix = prefix && ok
		if ok && int64(len(ids)) != max(j.Count, 1) {
			s.fail("job %s needs %d nodes, got %v", j.ID, j.Count, ids)
		}
		for _, id := range ids {
			if n := use(id, "assign "+j.ID); n.State != api.NodeIdle || n.JobID != "" {
				s.fail("job %s assigned to node %+v", j.ID, *n)
			}
		}
	}
	for id := range p.Assign {
		if j := s.jobs[id]; j == nil || j.Status != api.JobQueued {
			s.fail("assignment of job %+v", j)
		}
	}
	for id, d := range p.Deadlines {
		if n := s.nodes[id]; n == nil || n.State != api.NodeIdle || used[id] != "" || !d.After(s.now) {
			s.fail("deadline %s for node %v (%s)", d.Sub(s.now), n, used[id])
		}
	}
	if p.Create < 0 {
		s.fail("create %d", p.Create)
	}
}

// apply carries a plan out as the engine would.
func (s *sim) apply(p Plan) {
	for _, id := range p.Unplaceable {
		s.jobs[id].Status = api.JobFailed
	}
	for _, id := range p.Release {
		delete(s.nodes, id)
	}
	for _, id := range p.Drain {
		s.nodes[id].State = api.NodeLeaving
	}
	for jobID, ids := range p.Assign {
		s.jobs[jobID].Status = api.JobRunning
		for _, id := range ids {
			n := s.nodes[id]
			n.State, n.JobID, n.IdleSince = api.NodeRunning, jobID, time.Time{}
		}
	}
	for range p.Create {
		s.seq++
		id := fmt.Sprintf("n%05d", s.seq)
		s.nodes[id] = &Node{ID: id, State: api.NodePreparing}
	}
}

// checkState checks the invariants that hold once a plan has been carried out.
func (s *sim) checkState(p Plan) {
	s.t.Helper()
	live, idleN, onTheWay := s.count()
	if live > s.c.Max || live < min(s.c.Min, s.c.Max) {
		s.fail("%d live nodes, want %d..%d", live, s.c.Min, s.c.Max)
	}
	if p.Target != live {
		s.fail("target %d, live %d", p.Target, live)
	}
	var demand int64
	for _, j := range s.waiting() {
		demand += max(j.Count, 1)
	}
	if demand > idleN+onTheWay && live < s.c.Max {
		s.fail("jobs need %d nodes, %d idle and %d on the way, yet %d live < max %d", demand, idleN, onTheWay, live, s.c.Max)
	}
}

// step decides, checks, applies, and checks that deciding again asks for nothing.
func (s *sim) step() Plan {
	s.t.Helper()
	p := s.decide()
	for what, n := range map[string]int{
		"create": int(p.Create), "release": len(p.Release), "drain": len(p.Drain),
		"assign": len(p.Assign), "unplaceable": len(p.Unplaceable), "deadline": len(p.Deadlines),
	} {
		s.stats[what] += n
	}
	s.checkPlan(p)
	s.apply(p)
	s.checkState(p)
	again := s.decide()
	if !again.Empty() || again.Target != p.Target || !reflect.DeepEqual(again.Deadlines, p.Deadlines) {
		s.fail("not idempotent: after %s\nDecide again = %s", show(p), show(again))
	}
	return p
}

// endJob ends a running job (or puts it back to the queue) and frees its nodes.
func (s *sim) endJob(j *Job, status string) {
	j.Status = status
	for _, n := range s.nodes {
		if n.JobID != j.ID {
			continue
		}
		n.JobID = ""
		if n.State == api.NodeRunning {
			n.State, n.IdleSince = api.NodeIdle, s.now
		}
	}
}

func (s *sim) pick(match func(*Node) bool) *Node {
	var ids []string
	for id, n := range s.nodes {
		if match(n) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return s.nodes[ids[s.rng.IntN(len(ids))]]
}

func (s *sim) pickJob(status string) *Job {
	var ids []string
	for id, j := range s.jobs {
		if j.Status == status {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return s.jobs[ids[s.rng.IntN(len(ids))]]
}

// event makes one random outside change.
func (s *sim) event() {
	switch s.rng.IntN(10) {
	case 0, 1: // a job arrives
		s.seq++
		id := fmt.Sprintf("j%05d", s.seq)
		count := 1 + s.rng.Int64N(s.c.Max+1)
		s.jobs[id] = &Job{ID: id, Status: api.JobQueued, Count: count, SubmittedAt: s.now}
		s.log = append(s.log, "submit "+id+fmt.Sprint("x", count))
	case 2: // a node comes up
		if n := s.pick(func(n *Node) bool { return n.State == api.NodePreparing || n.State == api.NodePreempted }); n != nil {
			n.State, n.IdleSince = api.NodeIdle, s.now
			s.log = append(s.log, "up "+n.ID)
		}
	case 3: // a job ends
		if j := s.pickJob(api.JobRunning); j != nil {
			s.endJob(j, api.JobCompleted)
			s.log = append(s.log, "end "+j.ID)
		}
	case 4: // a node dies; its job fails
		if n := s.pick(func(n *Node) bool { return n.State != api.NodeUnusable }); n != nil {
			if j := s.jobs[n.JobID]; j != nil {
				s.endJob(j, api.JobFailed)
			}
			n.State, n.JobID = api.NodeUnusable, ""
			s.log = append(s.log, "die "+n.ID)
		}
	case 5: // a node is preempted; its job goes back to the queue
		if n := s.pick(func(n *Node) bool { return n.State == api.NodeIdle || n.State == api.NodeRunning }); n != nil {
			if j := s.jobs[n.JobID]; j != nil {
				s.endJob(j, api.JobQueued)
			}
			n.State, n.JobID = api.NodePreempted, ""
			s.log = append(s.log, "preempt "+n.ID)
		}
	case 6: // a queued job is canceled
		if j := s.pickJob(api.JobQueued); j != nil {
			j.Status = api.JobCanceled
			s.log = append(s.log, "cancel "+j.ID)
		}
	case 7: // settings change
		s.c = randomCluster(s.rng)
		s.log = append(s.log, fmt.Sprintf("settings %+v", s.c))
	default: // time passes
		d := time.Duration(s.rng.Int64N(int64(2*s.c.IdleAfter + time.Second)))
		s.now = s.now.Add(d)
		s.log = append(s.log, "wait "+d.String())
	}
}

func randomCluster(rng *rand.Rand) Cluster {
	maxN := 1 + rng.Int64N(8)
	return Cluster{
		Min:       rng.Int64N(maxN + 1),
		Max:       maxN,
		IdleAfter: []time.Duration{0, time.Second, 2 * time.Minute, time.Hour}[rng.IntN(4)],
	}
}

// TestRandomizedInvariants drives random clusters through random events. After every
// event it decides, checks the plan and carries it out, then checks min <= live <= max,
// target, scale-up at once and strict FIFO, and that deciding again asks for nothing. Now and
// then it lets every node come up and loops until stable, and it jumps to the earliest idle
// deadline to see the node go exactly then.
func TestRandomizedInvariants(t *testing.T) {
	stats := map[string]int{}
	defer func() { t.Logf("plans covered: %v", stats) }()
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 99))
		s := &sim{t: t, rng: rng, stats: stats, c: randomCluster(rng), now: now, nodes: map[string]*Node{}, jobs: map[string]*Job{}}
		var last Plan
		for range 300 {
			s.event()
			last = s.step()

			switch s.rng.IntN(20) {
			case 0: // settle: every node comes up; repeat until nothing changes
				for round := 0; ; round++ {
					if round > 20 {
						s.fail("no stable state after 20 rounds")
					}
					settled := true
					for _, n := range s.nodes {
						if n.State == api.NodePreparing || n.State == api.NodePreempted {
							n.State, n.IdleSince, settled = api.NodeIdle, s.now, false
						}
					}
					last = s.step()
					if settled && last.Empty() {
						break
					}
				}
			case 1: // the timer queue fires the earliest idle deadline
				if len(last.Deadlines) == 0 {
					break
				}
				first := ""
				for id, d := range last.Deadlines {
					if first == "" || d.Before(last.Deadlines[first]) || d.Equal(last.Deadlines[first]) && id < first {
						first = id
					}
				}
				s.now = last.Deadlines[first]
				s.log = append(s.log, "deadline "+first)
				last = s.step()
				stats["deadline fired"]++
				if !slices.Contains(last.Release, first) {
					s.fail("node %s not released at its deadline: %s", first, show(last))
				}
			}
		}
	}
}
