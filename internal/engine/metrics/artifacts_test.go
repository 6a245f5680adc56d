package metrics

import "testing"

func TestWatchArtifactsReportsTheStoresUsage(t *testing.T) {
	m := New(Options{})
	m.WatchArtifacts(func() (int64, int) { return 1234, 5 })
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			got[f.GetName()] = metric.GetGauge().GetValue()
		}
	}
	if got[Namespace+"_artifacts_bytes"] != 1234 || got[Namespace+"_artifacts_blobs"] != 5 {
		t.Fatalf("artifacts gauges = %v; want 1234 bytes and 5 blobs", got)
	}
}
