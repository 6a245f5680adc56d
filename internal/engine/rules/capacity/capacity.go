// Package capacity is the capacity rule of DESIGN 4: an engine may be given a number of
// vCPUs to hand out (mlcompute serve --capacity-vcpus). A node holds its size's vCPUs from
// the moment it is admitted until the driver confirms it gone. A node that does not fit
// waits in preparing; a node of a Dedicated cluster that does not fit preempts nodes of
// LowPriority clusters: they show as preempted, their jobs go back to the queue, and they
// wait for capacity like any other node.
//
// Admit is pure: the nodes in, the decision out; no store, no clock.
//
// # Order
//
//   - Waiting nodes are admitted Dedicated first, then oldest first (then by ID).
//   - Victims are the least costly first: idle LowPriority nodes before busy ones, and the
//     newest before older ones, so the least work is lost.
//   - Capacity that terminations in flight will free is promised to waiting nodes in order,
//     so nothing is preempted twice for the same need.
package capacity

import (
	"cmp"
	"slices"
	"time"
)

// Node is one node as the rule sees it.
type Node struct {
	ID        string
	VCPUs     int64
	Dedicated bool
	// Admitted: the node holds capacity (the driver was or is being asked for it).
	Admitted bool
	// Terminating: admitted, and being released or preempted; its capacity comes back
	// once the driver confirms it gone.
	Terminating bool
	// Waiting: not admitted, and preparing or preempted (it wants capacity).
	Waiting bool
	// Preemptible: admitted, LowPriority, and neither terminating, unusable nor leaving.
	Preemptible bool
	Idle        bool
	CreatedOn   time.Time
}

// Decision is what Admit decided.
type Decision struct {
	// Admit lists waiting nodes that get capacity now, in admission order.
	Admit []string
	// Preempt lists LowPriority nodes to preempt, in order.
	Preempt []string
}

// Admit hands capacity (vCPUs; 0 means unlimited) to waiting nodes.
func Admit(capacity int64, nodes []Node) Decision {
	var d Decision
	var used, terminating int64
	var waiting, victims []Node
	for _, n := range nodes {
		switch {
		case n.Admitted:
			used += n.VCPUs
			if n.Terminating {
				terminating += n.VCPUs
			} else if n.Preemptible {
				victims = append(victims, n)
			}
		case n.Waiting:
			waiting = append(waiting, n)
		}
	}
	slices.SortFunc(waiting, func(a, b Node) int {
		if a.Dedicated != b.Dedicated {
			if a.Dedicated {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreatedOn.Compare(b.CreatedOn), cmp.Compare(a.ID, b.ID))
	})
	slices.SortFunc(victims, func(a, b Node) int {
		if a.Idle != b.Idle {
			if a.Idle {
				return -1
			}
			return 1
		}
		return cmp.Or(b.CreatedOn.Compare(a.CreatedOn), cmp.Compare(b.ID, a.ID))
	})

	// projected is what will be in use once the terminations in flight complete.
	projected := used - terminating
	for _, w := range waiting {
		need := w.VCPUs
		if capacity == 0 || used+need <= capacity {
			d.Admit = append(d.Admit, w.ID)
			used += need
			projected += need
			continue
		}
		if !w.Dedicated {
			continue
		}
		if projected+need <= capacity {
			projected += need // it fits once the nodes being terminated are gone
			continue
		}
		var picked []Node
		free := int64(0)
		for _, v := range victims {
			if projected-free+need <= capacity {
				break
			}
			picked = append(picked, v)
			free += v.VCPUs
		}
		if projected-free+need > capacity {
			continue // even preempting every LowPriority node would not make room
		}
		victims = victims[len(picked):]
		for _, v := range picked {
			d.Preempt = append(d.Preempt, v.ID)
		}
		projected += need - free
	}
	return d
}
