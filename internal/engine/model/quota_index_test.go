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
