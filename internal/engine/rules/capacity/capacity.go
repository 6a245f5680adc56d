// Package capacity is the capacity rule of DESIGN 4: an engine may be given a number of
// vCPUs to hand out (mlcompute serve --capacity-vcpus). A node holds its size's vCPUs from
// the moment it is admitted until the driver confirms it gone. A node that does not fit
// waits in preparing; a node of a Dedicated cluster that does not fit preempts nodes of
// LowPriority clusters: they show as preempted, their jobs go back to the queue, and they
// wait for capacity like any other node.
//
// The same admission holds the machine's own rules for local nodes (Node.Local):
//
//   - GPUs: a node of a size with N GPUs is admitted with N of the machine's GPUs
//     (Limits.GPUs) that no other node holds, and holds them, for itself alone, until the
//     driver confirms it gone. A node that finds too few free waits, with a reason naming
//     its size and the count; a size with more GPUs than the machine has never fits. With
//     no GPUs in Limits the rule is off: GPU sizes run without devices.
//   - Isolated sizes: a node of an isolated size is admitted only when no other local node
//     holds the machine, and while it does no other local node is admitted.
//
// Nothing is preempted for GPUs or isolation: preemption frees vCPUs only.
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
	"fmt"
	"slices"
	"time"
)

// Limits is what admission hands out.
type Limits struct {
	// VCPUs bounds the vCPUs all nodes together may hold; 0 means unlimited.
	VCPUs int64
	// GPUs are the machine's GPU devices, in the order they are handed out, for local
	// nodes. Empty: the GPU rule is off.
	GPUs []string
}

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

	// Size names the node's size in the reasons a waiting node is given.
	Size string
	// Local: the node runs on this machine, so the GPU and isolation rules hold for it.
	Local bool
	// GPUs is how many GPUs the node's size has.
	GPUs int64
	// Devices are the GPUs an admitted node holds.
	Devices []string
	// Isolated: the size's node is the only node on its machine.
	Isolated bool
}

// Decision is what Admit decided.
type Decision struct {
	// Admit lists waiting nodes that get capacity now, in admission order.
	Admit []string
	// Preempt lists LowPriority nodes to preempt, in order.
	Preempt []string
	// Devices are the GPUs each admitted node of a GPU size gets, by node ID.
	Devices map[string][]string
	// Waits says why each waiting node that was not admitted waits, by node ID: the vCPUs,
	// GPUs or machine it lacks.
	Waits map[string]string
}

// Admit hands capacity to waiting nodes.
func Admit(limits Limits, nodes []Node) Decision {
	d := Decision{Devices: map[string][]string{}, Waits: map[string]string{}}
	capacity := limits.VCPUs
	var used, terminating int64
	var waiting, victims []Node
	m := machine{gpus: limits.GPUs, held: map[string]bool{}}
	for _, n := range nodes {
		switch {
		case n.Admitted:
			m.hold(n, n.Devices)
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
		devices, why := m.fit(w)
		if why != "" {
			d.Waits[w.ID] = why
			continue
		}
		need := w.VCPUs
		if capacity == 0 || used+need <= capacity {
			d.Admit = append(d.Admit, w.ID)
			if len(devices) > 0 {
				d.Devices[w.ID] = devices
			}
			m.hold(w, devices)
			used += need
			projected += need
			continue
		}
		d.Waits[w.ID] = fmt.Sprintf("size %s needs %d vCPUs and %d of the engine's %d are free (mlcompute serve --capacity-vcpus)", w.Size, need, max(capacity-used, 0), capacity)
		if !w.Dedicated {
			continue
		}
		if projected+need <= capacity {
			projected += need  // it fits once the nodes being terminated are gone
			m.hold(w, devices) // promised: its GPUs and the machine are kept for it
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
		m.hold(w, devices) // promised: its GPUs and the machine are kept for it
	}
	return d
}

// machine is the GPU and isolation state of this machine's local nodes during one Admit.
type machine struct {
	gpus []string
	held map[string]bool // GPUs held by admitted nodes (terminating ones too)
	// nodes counts the local nodes that hold (or are promised) the machine; isolated names
	// the isolated one among them, if any.
	nodes    int
	isolated string
}

// hold records a local node that holds the machine and devices: admitted, admitted now,
// or promised capacity being freed.
func (m *machine) hold(n Node, devices []string) {
	if !n.Local {
		return
	}
	m.nodes++
	if n.Isolated {
		m.isolated = n.ID
	}
	for _, g := range devices {
		m.held[g] = true
	}
}

// fit returns the GPUs a waiting node would get, or why the machine cannot take it now.
func (m *machine) fit(n Node) ([]string, string) {
	if !n.Local {
		return nil, ""
	}
	switch {
	case m.isolated != "":
		return nil, fmt.Sprintf("node %s of an isolated size holds this machine alone", m.isolated)
	case n.Isolated && m.nodes > 0:
		return nil, fmt.Sprintf("size %s is isolated and runs alone on this machine; %d other node(s) hold it", n.Size, m.nodes)
	}
	if len(m.gpus) == 0 || n.GPUs <= 0 {
		return nil, ""
	}
	if n.GPUs > int64(len(m.gpus)) {
		return nil, fmt.Sprintf("size %s needs %d GPUs and this machine has only %d", n.Size, n.GPUs, len(m.gpus))
	}
	var free []string
	for _, g := range m.gpus {
		if !m.held[g] {
			free = append(free, g)
		}
	}
	if int64(len(free)) < n.GPUs {
		return nil, fmt.Sprintf("size %s needs %d GPUs and %d of this machine's %d are free", n.Size, n.GPUs, len(free), len(m.gpus))
	}
	return free[:n.GPUs], ""
}
