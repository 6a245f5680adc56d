package daemon

import (
	"context"
	"strings"
	"testing"
)

// The slurm driver finds its jobs by the engine id, so a data dir keeps its id.
func TestEngineIDIsMadeOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	first, err := engineID(dir)
	if err != nil || !strings.HasPrefix(first, "mlc-") {
		t.Fatalf("engineID = %q, %v", first, err)
	}
	again, err := engineID(dir)
	if err != nil || again != first {
		t.Fatalf("engineID again = %q, %v; want %q", again, err, first)
	}
}

func TestUnknownNodeDriverIsRefused(t *testing.T) {
	_, err := nodeDriver(context.Background(), Options{Nodes: "nomad", DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "use local, slurm or kubernetes") {
		t.Fatalf("nodeDriver(nomad): %v", err)
	}
}
