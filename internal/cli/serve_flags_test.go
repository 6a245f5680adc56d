package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

// --containerd-address is for local nodes: with another driver serve refuses to start,
// naming the flag, before it touches a data dir.
func TestServeRefusesContainerdWithoutLocalNodes(t *testing.T) {
	for _, nodes := range []string{"slurm", "kubernetes"} {
		err := runServe(context.Background(), &globals{}, serveFlags{minIdleShutdown: 15 * time.Minute, nodes: nodes, containerd: "/run/containerd/containerd.sock"})
		if err == nil || !strings.Contains(err.Error(), "--containerd-address is for local nodes") || !strings.Contains(err.Error(), nodes) {
			t.Fatalf("--nodes %s --containerd-address: %v", nodes, err)
		}
	}
}
