package model

import "testing"

func TestQuotaIndexSumsPerWorkspaceAndFamily(t *testing.T) {
	ix := NewQuotaIndex()
	ix.Set("ws/a", Holding{Workspace: "ws", Name: "a", Family: "f1", VCPUs: 16})
	ix.Set("ws/b", Holding{Workspace: "ws", Name: "b", Family: "f1", VCPUs: 8})
	ix.Set("ws/c", Holding{Workspace: "ws", Name: "c", Family: "f2", VCPUs: 4})
	ix.Set("other/a", Holding{Workspace: "other", Name: "a", Family: "f1", VCPUs: 100})

	if got := ix.Used("ws", "f1", ""); got != 24 {
		t.Fatalf("Used(ws, f1) = %d, want 24", got)
	}
	if got := ix.Used("ws", "f1", "ws/a"); got != 8 {
		t.Fatalf("Used(ws, f1) without a = %d, want 8", got)
	}
	// Leaving out a compute of another family changes nothing.
	if got := ix.Used("ws", "f1", "ws/c"); got != 24 {
		t.Fatalf("Used(ws, f1) without c = %d, want 24", got)
	}

	// Replacing a holding (a scale-settings update) moves the sum, also across families.
	ix.Set("ws/a", Holding{Workspace: "ws", Name: "a", Family: "f2", VCPUs: 2})
	if got, want := ix.Used("ws", "f1", ""), int64(8); got != want {
		t.Fatalf("after resize Used(ws, f1) = %d, want %d", got, want)
	}
	if got, want := ix.Used("ws", "f2", ""), int64(6); got != want {
		t.Fatalf("after resize Used(ws, f2) = %d, want %d", got, want)
	}

	ix.Delete("ws/b")
	ix.Delete("ws/b") // deleting twice is harmless
	if got := ix.Used("ws", "f1", ""); got != 0 {
		t.Fatalf("after delete Used(ws, f1) = %d, want 0", got)
	}
	if h := ix.Holders("ws", "f2", "ws/c"); len(h) != 1 || h[0].Name != "a" {
		t.Fatalf("Holders(ws, f2) without c = %+v, want [a]", h)
	}
}

// Endpoint deployments hold quota in the same sums as computes; an endpoint's holdings are
// replaced as a whole (a deployment dropped from the spec stops holding).
func TestQuotaIndexCountsEndpointDeployments(t *testing.T) {
	ix := NewQuotaIndex()
	ix.Set("ws/gpu", Holding{Workspace: "ws", Name: "gpu", Family: "f1", VCPUs: 12})
	ix.SetEndpoint("ws/scorer", map[string]Holding{
		"blue":  {Workspace: "ws", Name: "endpoint scorer deployment blue", Family: "f1", VCPUs: 8},
		"green": {Workspace: "ws", Name: "endpoint scorer deployment green", Family: "f1", VCPUs: 4},
	})
	if got := ix.Used("ws", "f1"); got != 24 {
		t.Fatalf("Used(ws, f1) = %d, want the compute's 12 and the deployments' 12", got)
	}
	if got := ix.Used("ws", "f1", ix.EndpointKeys("ws/scorer")...); got != 12 {
		t.Fatalf("Used(ws, f1) without the endpoint = %d, want 12", got)
	}
	if h := ix.Holders("ws", "f1", "ws/gpu"); len(h) != 2 || h[0].Name != "endpoint scorer deployment blue" {
		t.Fatalf("Holders(ws, f1) without gpu = %+v, want the two deployments", h)
	}
	ix.SetEndpoint("ws/scorer", map[string]Holding{"green": {Workspace: "ws", Name: "endpoint scorer deployment green", Family: "f1", VCPUs: 6}})
	if got := ix.Used("ws", "f1"); got != 18 {
		t.Fatalf("after blue was dropped Used(ws, f1) = %d, want 18", got)
	}
	if got := ix.EndpointHoldings("ws/scorer"); len(got) != 1 || got["green"].VCPUs != 6 {
		t.Fatalf("EndpointHoldings = %+v, want green's 6", got)
	}
	ix.SetEndpoint("ws/scorer", nil)
	if got := ix.Used("ws", "f1"); got != 12 {
		t.Fatalf("after the endpoint was deleted Used(ws, f1) = %d, want 12", got)
	}
}
