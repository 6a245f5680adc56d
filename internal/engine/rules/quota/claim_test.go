package quota

import (
	"math"
	"strings"
	"testing"
)

func TestHoldsAndUsedSaturate(t *testing.T) {
	if got := Holds(4, 8); got != 32 {
		t.Errorf("Holds(4, 8) = %d", got)
	}
	if got := Holds(math.MaxInt64, 2); got != math.MaxInt64 {
		t.Errorf("Holds of an overflowing record = %d; want MaxInt64", got)
	}
	if got := Used(8, 16, 4); got != 28 {
		t.Errorf("Used = %d", got)
	}
	if got := Used(math.MaxInt64, 1); got != math.MaxInt64 {
		t.Errorf("Used past MaxInt64 = %d; want it saturated", got)
	}
}

// One message for the engine and the provider: what is asked, what is left, who holds
// the rest, and the two ways out.
func TestEvaluate(t *testing.T) {
	gpu := Claim{Compute: "gpu", Workspace: "lab", Family: "standardNCSv3Family", Size: "Standard_NC6s_v3", SizeVCPUs: 6,
		Nodes: 3, Limit: 12, CountName: "max_node_count"}
	holders := func() []Holder { return []Holder{{Name: "other", VCPUs: 6}} }
	for _, tc := range []struct {
		name  string
		claim func(Claim) Claim
		used  int64
		want  []string // nil: fits
	}{
		{"fits", func(c Claim) Claim { c.Nodes = 2; return c }, 0, nil},
		{"fewer nodes fit", func(c Claim) Claim { return c }, 0, []string{
			`compute "gpu" needs 18 vCPUs of standardNCSv3Family (3 nodes x 6 vCPUs of Standard_NC6s_v3)`,
			`workspace "lab" has 12 of its 12 left`, "lower max_node_count to 2",
			"quotas = { standardNCSv3Family = 18 } on the workspace"}},
		{"held by another", func(c Claim) Claim { return c }, 6, []string{
			"has 6 of its 12 left (already used by other (6 vCPUs))", "lower max_node_count to 1",
			"quotas = { standardNCSv3Family = 24 }"}},
		{"no node fits, approval pending", func(c Claim) Claim { c.Limit, c.ApprovalPending = 0, true; return c }, 0, []string{
			`workspace "lab" has 0 of its 0 vCPUs of standardNCSv3Family left`, "less than one node of Standard_NC6s_v3 (6 vCPUs)",
			`compute "gpu" cannot get any node`, "family standardNCSv3Family requires approval",
			"add quotas = { standardNCSv3Family = 18 } to the workspace", "or choose a vm_size of another family"}},
		{"overflow", func(c Claim) Claim { c.Nodes = math.MaxInt64; return c }, 0, []string{
			"more vCPUs than any quota can hold; lower max_node_count"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Evaluate(tc.claim(gpu), tc.used, holders)
			if tc.want == nil {
				if r != nil {
					t.Fatalf("refused: %v", r)
				}
				return
			}
			if r == nil {
				t.Fatal("fits; want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Error(), w) {
					t.Errorf("message %q lacks %q", r.Error(), w)
				}
			}
		})
	}
}
