package quota

import (
	"fmt"
	"math"
	"strings"
)

// This file is the engine's quota check of a compute, run on every create and scale-up and
// for the plan-time check the provider asks for (POST .../quota:check, computes.CheckQuota):
// a compute's holding (Holds), the sum (Used), the decision (Check) and its one message
// (Refusal.Error).

// Holds is what a compute of nodes nodes, each of vcpus vCPUs, holds of its family's quota:
// nodes x vcpus, or math.MaxInt64 when that overflows (a record no quota can hold).
func Holds(nodes, vcpus int64) int64 {
	held, ok := Demand(nodes, vcpus)
	if !ok {
		return math.MaxInt64
	}
	return held
}

// Used sums holdings, saturating at math.MaxInt64.
func Used(holdings ...int64) int64 {
	var used int64
	for _, h := range holdings {
		sum, ok := Add(used, h)
		if !ok {
			return math.MaxInt64
		}
		used = sum
	}
	return used
}

// Claim is what one compute asks of its workspace's quota for its size's family.
type Claim struct {
	Compute   string
	Workspace string
	Family    string
	Size      string
	SizeVCPUs int64
	Nodes     int64
	// Limit is the workspace's effective quota of the family.
	Limit int64
	// CountName names the count a user lowers to fit (max_node_count, instance_count), or
	// is empty when the count is fixed (an instance's one node).
	CountName string
	// ApprovalPending is true when the family requires approval and the workspace sets no
	// quota for it.
	ApprovalPending bool
}

// Holder is another compute of the workspace holding vCPUs of the family.
type Holder struct {
	Name  string
	VCPUs int64
}

// Refusal is a claim the quota does not hold.
type Refusal struct {
	Claim
	Decision
	// Want is the claim's vCPUs; Overflow is true when they overflow.
	Want     int64
	Overflow bool
	Holders  []Holder
}

// Evaluate checks c against used, the vCPUs the workspace's other computes of the family
// hold, and returns nil when it fits. holders, called only for a refusal, names them.
func Evaluate(c Claim, used int64, holders func() []Holder) *Refusal {
	want, ok := Demand(c.Nodes, c.SizeVCPUs)
	if !ok {
		return &Refusal{Claim: c, Overflow: true, Decision: Decision{Left: max(c.Limit-max(used, 0), 0)}}
	}
	d := Check(used, want, c.Limit)
	if d.Fits {
		return nil
	}
	r := &Refusal{Claim: c, Decision: d, Want: want}
	if holders != nil {
		r.Holders = holders()
	}
	return r
}

// FittingNodes is how many nodes of the size the quota has room for.
func (r *Refusal) FittingNodes() int64 { return r.Left / max(r.SizeVCPUs, 1) }

// Error is the refusal's one message, the engine's error and the provider's diagnostic.
func (r *Refusal) Error() string {
	if r.Overflow {
		return fmt.Sprintf("compute %q asks for %d nodes x %d vCPUs of %s, more vCPUs than any quota can hold; lower %s",
			r.Compute, r.Nodes, r.SizeVCPUs, r.Size, r.countName())
	}
	used := ""
	if len(r.Holders) > 0 {
		names := make([]string, 0, len(r.Holders))
		for _, h := range r.Holders {
			names = append(names, fmt.Sprintf("%s (%d vCPUs)", h.Name, h.VCPUs))
		}
		used = fmt.Sprintf(" (already used by %s)", strings.Join(names, ", "))
	}
	raise := fmt.Sprintf("raise the family's quota with quotas = { %s = %d } on the workspace", r.Family, r.Need)
	if r.ApprovalPending {
		raise = fmt.Sprintf("family %s requires approval and has no quota until one is set: add quotas = { %s = %d } to the workspace",
			r.Family, r.Family, r.Need)
	}
	if fits := r.FittingNodes(); fits == 0 || r.CountName == "" {
		return fmt.Sprintf("workspace %q has %d of its %d vCPUs of %s left%s, less than one node of %s (%d vCPUs), so compute %q "+
			"cannot get any node; %s, or choose a vm_size of another family",
			r.Workspace, r.Left, r.Limit, r.Family, used, r.Size, r.SizeVCPUs, r.Compute, raise)
	}
	return fmt.Sprintf("compute %q needs %d vCPUs of %s (%d nodes x %d vCPUs of %s) but workspace %q has %d of its %d left%s; "+
		"lower %s to %d, or %s",
		r.Compute, r.Want, r.Family, r.Nodes, r.SizeVCPUs, r.Size, r.Workspace, r.Left, r.Limit, used, r.CountName, r.FittingNodes(), raise)
}

func (r *Refusal) countName() string {
	if r.CountName == "" {
		return "the node count"
	}
	return r.CountName
}
