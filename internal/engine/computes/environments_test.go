package computes

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// Where container tasks may go: the engine's local nodes with a containerd, its Slurm nodes
// with a container runner, its Kubernetes pods but for GPU sizes (the task's container does
// not get the node's GPUs), attached machines when the engine can copy its binary there,
// attached Kubernetes clusters (pods of the image). Each refusal says why.
func TestNoContainerRuntimeNamesWhy(t *testing.T) {
	cluster := model.Compute{Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2"}
	gpuCluster := model.Compute{Type: api.TypeComputeCluster, VMSize: "Standard_NC6s_v3"}
	machine := model.Compute{Type: api.TypeAttached, Attached: &model.Attached{Address: "10.0.0.5"}}
	kube := model.Compute{Type: api.TypeKubernetes, Kubernetes: &model.KubeCluster{}}
	for _, tc := range []struct {
		name   string
		cfg    Config
		rec    model.Compute
		refuse string // "" when the compute runs container tasks
	}{
		{"local nodes with containerd", Config{Local: true, Containers: true}, cluster, ""},
		{"local nodes without containerd", Config{Local: true}, cluster, "have no container runtime: start `mlcompute serve` with --containerd-address"},
		{"Slurm nodes with a runner", Config{Containers: true}, cluster, ""},
		{"Kubernetes nodes", Config{Containers: true, PodNodes: true}, cluster, ""},
		{"Kubernetes nodes of a GPU size", Config{Containers: true, PodNodes: true}, gpuCluster,
			`compute "vm" is of size Standard_NC6s_v3, whose GPUs (1) this engine's Kubernetes pods give to the node's own container, not to the container an image runs in: run the job on an attached Kubernetes cluster`},
		{"nodes without a runtime", Config{}, cluster, "this engine's nodes do not run container environments"},
		{"an attached machine", Config{Local: true, AttachedContainers: true}, machine, ""},
		{"an attached machine of an engine off Linux", Config{Local: true, Containers: true}, machine, `compute "vm" is an attached machine, and this engine runs images on attached machines with its own binary`},
		{"an attached Kubernetes cluster (its pods are of the image)", Config{Local: true}, kube, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
			tc.cfg.Store, tc.cfg.Clock, tc.cfg.Logger = storetest.Open(t, t.TempDir()), clk, hclog.NewNullLogger()
			tc.cfg.Loop = runtime.New(runtime.Config{Clock: clk, Manual: true})
			c, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := c.NoContainerRuntime(tc.rec, "vm")
			if (tc.refuse == "") != (got == "") || !strings.Contains(got, tc.refuse) {
				t.Fatalf("NoContainerRuntime = %q; want %q", got, tc.refuse)
			}
			// An endpoint's instances, on the engine's own nodes of the same size, get the
			// same answer, in words about the deployment.
			if tc.rec.Attached != nil || tc.rec.Kubernetes != nil {
				return
			}
			deployment := c.NoDeploymentRuntime(tc.rec.VMSize)
			if (got == "") != (deployment == "") {
				t.Fatalf("NoDeploymentRuntime = %q; for a compute %q", deployment, got)
			}
			if tc.rec.VMSize == gpuCluster.VMSize && !strings.Contains(deployment, "the deployment's instance type is of size Standard_NC6s_v3") {
				t.Fatalf("NoDeploymentRuntime of a GPU size = %q; want it to name the instance type", deployment)
			}
		})
	}
}
