package cluster

import (
	"cmp"
	"slices"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Cluster is a cluster's scale settings.
type Cluster struct {
	Min, Max int64
	// IdleAfter is scale_down_nodes_after_idle_duration.
	IdleAfter time.Duration
}

// Node is one node of the cluster as stored.
type Node struct {
	ID string
	// State is one of api.NodeIdle, NodeRunning, NodePreparing, NodeLeaving, NodeUnusable
	// or NodePreempted.
	State string
	// JobID is the job the node runs or is being given, empty when none.
	JobID string
	// IdleSince is when the node last became idle; read only for idle nodes.
	IdleSince time.Time
}

// Job is a job targeting the cluster. Only queued jobs are read.
type Job struct {
	ID          string
	Status      string // api.JobQueued etc.
	Count       int64  // nodes needed (instance_count)
	SubmittedAt time.Time
}

// Plan is what the engine should do now. Release, Drain, Assign and Unplaceable never
// share a node, and every list is in a deterministic order.
type Plan struct {
	// Create is the number of nodes to start now.
	Create int64
	// Release lists nodes to terminate now: unusable ones, drained ones whose job ended,
	// live ones beyond Max, and idle ones past their idle deadline.
	Release []string
	// Drain lists busy nodes beyond Max: mark them leaving; they are released once their
	// job ends.
	Drain []string
	// Assign maps a queued job ID to the idle nodes it starts on now, Count of them, in
	// rank order.
	Assign map[string][]string
	// Unplaceable lists queued jobs that need more nodes than Max; the engine fails them.
	Unplaceable []string
	// Deadlines maps an idle node that is not protected by Min to when it becomes
	// releasable, for the timer queue; only deadlines still ahead of now are listed.
	Deadlines map[string]time.Time
	// Target is target_node_count: the live nodes once the plan is carried out.
	Target int64
}

// Empty reports whether the plan asks for no action; Deadlines and Target are information,
// not actions.
func (p Plan) Empty() bool {
	return p.Create == 0 && len(p.Release) == 0 && len(p.Drain) == 0 &&
		len(p.Assign) == 0 && len(p.Unplaceable) == 0
}

// Decide returns what the cluster should do at now, from its stored state alone. The
// package documentation states the rules and the choices behind them.
func Decide(c Cluster, nodes []Node, jobs []Job, now time.Time) Plan {
	maxNodes := max(c.Max, 0)
	minNodes := min(max(c.Min, 0), maxNodes)
	idleAfter := max(c.IdleAfter, 0)
	var p Plan

	// Classify, in ID order so that the input order does not matter.
	nodes = slices.Clone(nodes)
	slices.SortStableFunc(nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	var idle, busy, preparing, preempted []Node
	held := map[string]bool{} // job IDs some node holds
	for i, n := range nodes {
		if i > 0 && nodes[i-1].ID == n.ID {
			continue // a duplicate record: the first one wins
		}
		if n.JobID != "" {
			held[n.JobID] = true
		}
		switch {
		case n.State == api.NodeUnusable:
			p.Release = append(p.Release, n.ID)
		case n.State == api.NodeLeaving:
			if n.JobID == "" {
				p.Release = append(p.Release, n.ID)
			}
		case n.State == api.NodeRunning || n.JobID != "":
			busy = append(busy, n)
		case n.State == api.NodeIdle:
			idle = append(idle, n)
		case n.State == api.NodePreempted:
			preempted = append(preempted, n)
		default: // preparing, or a state this package does not know
			preparing = append(preparing, n)
		}
	}
	longestIdleFirst := func(a, b Node) int {
		if c := a.IdleSince.Compare(b.IdleSince); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	}
	slices.SortFunc(idle, longestIdleFirst)

	// Rule 2: no more than Max live nodes.
	live := int64(len(idle) + len(busy) + len(preparing) + len(preempted))
	excess := live - maxNodes
	take := func(from []Node, n int64, highestFirst bool) (kept []Node, taken []string) {
		n = min(n, int64(len(from)))
		if n <= 0 {
			return from, nil
		}
		if highestFirst { // from is in ID order
			cut := int64(len(from)) - n
			for i := len(from) - 1; i >= int(cut); i-- {
				taken = append(taken, from[i].ID)
			}
			return from[:cut], taken
		}
		for _, x := range from[:n] {
			taken = append(taken, x.ID)
		}
		return from[n:], taken
	}
	var ids []string
	preempted, ids = take(preempted, excess, false)
	excess -= int64(len(ids))
	p.Release = append(p.Release, ids...)
	preparing, ids = take(preparing, excess, true)
	excess -= int64(len(ids))
	p.Release = append(p.Release, ids...)
	idle, ids = take(idle, excess, false)
	excess -= int64(len(ids))
	p.Release = append(p.Release, ids...)
	_, ids = take(busy, excess, true)
	p.Drain = ids
	live = min(live, maxNodes)

	// Rule 3: place queued jobs, strict FIFO, all or nothing.
	placed := Place(idle, jobs, held, maxNodes) // idle is longest idle first
	p.Assign, p.Unplaceable = placed.Assign, placed.Unplaceable
	free, demand := placed.Free, placed.Demand

	// Rule 4: scale up at once, to Min and to what the waiting jobs lack, within Max.
	onTheWay := int64(len(free) + len(preparing) + len(preempted))
	p.Create = max(minNodes-live, demand-onTheWay, 0)
	p.Create = min(p.Create, maxNodes-live)

	// Rule 5: idle scale-down of the free idle nodes the waiting jobs will not take.
	reserved := min(int64(len(free)), demand)
	candidates := free[reserved:] // still longest idle first
	others := live + p.Create - int64(len(candidates))
	protected := min(max(minNodes-others, 0), int64(len(candidates)))
	var released int64
	for _, n := range candidates[:int64(len(candidates))-protected] {
		deadline := n.IdleSince.Add(idleAfter)
		if !now.Before(deadline) {
			p.Release = append(p.Release, n.ID)
			released++
			continue
		}
		if p.Deadlines == nil {
			p.Deadlines = map[string]time.Time{}
		}
		p.Deadlines[n.ID] = deadline
	}

	p.Target = live + p.Create - released
	return p
}

// Placement is what rule 3 decided.
type Placement struct {
	// Assign maps a queued job ID to the free nodes it starts on, in rank order.
	Assign map[string][]string
	// Unplaceable lists queued jobs that need more nodes than maxNodes.
	Unplaceable []string
	// Free are the free nodes no job took, in the order given.
	Free []Node
	// Demand is the number of nodes the queued jobs that did not start need together.
	Demand int64
}

// Place is rule 3 on its own: it places the queued jobs that no node holds (held: job IDs
// some node holds) on free nodes, strict FIFO and all or nothing, taking free nodes in the
// order given (Decide gives its idle nodes longest idle first). A compute instance places
// its one job with it too, on its one node.
func Place(free []Node, jobs []Job, held map[string]bool, maxNodes int64) Placement {
	var queued []Job
	seen := map[string]bool{}
	for _, j := range jobs {
		if j.Status == api.JobQueued && !held[j.ID] && !seen[j.ID] {
			seen[j.ID] = true
			queued = append(queued, j)
		}
	}
	slices.SortStableFunc(queued, func(a, b Job) int {
		if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	var p Placement
	blocked := false
	for _, j := range queued {
		count := max(j.Count, 1)
		switch {
		case count > maxNodes:
			p.Unplaceable = append(p.Unplaceable, j.ID)
		case !blocked && count <= int64(len(free)):
			if p.Assign == nil {
				p.Assign = map[string][]string{}
			}
			for _, n := range free[:count] {
				p.Assign[j.ID] = append(p.Assign[j.ID], n.ID)
			}
			free = free[count:]
		default:
			blocked = true
			p.Demand += count
		}
	}
	p.Free = free
	return p
}
