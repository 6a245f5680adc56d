// Package quota is the workspace quota rule of DESIGN 4: the vCPUs a compute may hold
// (max_node_count times its size's vCPUs) summed over the workspace's computes of one VM
// family must fit the family's quota. Every product and sum is checked: an overflow never
// wraps into a small number that fits, it is reported as a demand that does not fit.
//
// It is pure: inputs in, decision out, no store and no clock.
package quota

import "math"

// Demand is the vCPUs a compute of nodes nodes of vcpus vCPUs each may hold. ok is false
// when an input is negative or the product overflows int64.
func Demand(nodes, vcpus int64) (vcpusHeld int64, ok bool) {
	if nodes < 0 || vcpus < 0 {
		return 0, false
	}
	if vcpus != 0 && nodes > math.MaxInt64/vcpus {
		return 0, false
	}
	return nodes * vcpus, true
}

// Add returns a+b for non-negative a and b; ok is false on overflow or a negative input.
func Add(a, b int64) (sum int64, ok bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// Decision is the outcome of Check.
type Decision struct {
	// Fits reports whether used+want is within limit.
	Fits bool
	// Left is what the family still has for want: limit-used, never below 0.
	Left int64
	// Need is used+want, the quota that would make want fit (0 when it overflows).
	Need int64
}

// Check decides whether a demand of want vCPUs fits a family whose other computes already
// hold used vCPUs, under limit.
func Check(used, want, limit int64) Decision {
	d := Decision{Left: max(limit-max(used, 0), 0)}
	total, ok := Add(used, want)
	if !ok {
		return d
	}
	d.Need, d.Fits = total, total <= limit
	return d
}
