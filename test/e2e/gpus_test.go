//go:build unix

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

var gpuConfig = requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name   = "e2e-team"
  quotas = { standardNCSv3Family = 72 }
}

resource "mlcompute_compute_cluster" "gpu" {
  for_each     = toset(["gpu-a", "gpu-b", "gpu-c"])
  name         = each.key
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_NC12s_v3" # 2 GPUs
  scale_settings = {
    min_node_count                       = 0
    max_node_count                       = 1
    scale_down_nodes_after_idle_duration = "PT2S"
  }
}
`

// TestE2E_FakeGPUs: on `mlcompute serve --fake-gpus 4`, two 2-GPU nodes see disjoint
// device lists; a third waits, saying why, and gets the GPUs of the first once it is
// released; `mlcompute status` shows which node holds which GPU.
func TestE2E_FakeGPUs(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.startServe("--fake-gpus", "4")
	u.writeConfig(gpuConfig)
	u.mustTerraform("apply", "-auto-approve")

	submit := func(compute, script string) string {
		out, code := u.cli("job", "submit", "--workspace", "e2e-team", "--compute", compute, "--", "sh", "-c", script)
		if code != 0 {
			t.Fatalf("job submit on %s: exit %d: %s", compute, code, out)
		}
		return strings.TrimSpace(out)
	}
	show := func(id string) api.Job {
		out, code := u.cli("job", "show", "--workspace", "e2e-team", id, "-o", "json")
		if code != 0 {
			t.Fatalf("job show %s: exit %d: %s", id, code, out)
		}
		var j api.Job
		decodeJSON(t, out, &j)
		return j
	}
	devices := func(id string) string {
		var got string
		u.waitFor("job "+id+" prints its devices", 30*time.Second, func() bool {
			out, _ := u.cli("job", "logs", "--workspace", "e2e-team", id)
			_, rest, ok := strings.Cut(out, "devices=")
			got, _, _ = strings.Cut(rest, "\n")
			return ok && strings.Contains(rest, "\n")
		})
		return got
	}
	const hold = `echo "devices=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES"; sleep 600`
	a, b := submit("gpu-a", hold), submit("gpu-b", hold)
	da, db := devices(a), devices(b)
	if !disjointPairs(da, db) {
		t.Fatalf("the two 2-GPU nodes see %q and %q; want two devices each, disjoint, the same for CUDA and NVIDIA", da, db)
	}

	c := submit("gpu-c", `echo "devices=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES"`)
	const why = "size Standard_NC12s_v3 needs 2 GPUs and 0 of this machine's 4 are free"
	u.waitFor("the third job says why it waits", 30*time.Second, func() bool { return strings.Contains(show(c).Reason, why) })
	gc := u.compute("gpu-c")
	if len(gc.Errors) == 0 || !strings.Contains(gc.Errors[0].Message, why) {
		t.Fatalf("compute gpu-c errors %+v; want one saying %q", gc.Errors, why)
	}
	if len(gc.Nodes) != 1 || gc.Nodes[0].State != api.NodePreparing || gc.Nodes[0].Reason != why {
		t.Fatalf("gpu-c's nodes %+v; want one preparing with reason %q", gc.Nodes, why)
	}
	out, code := u.cli("status", "-o", "json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, out)
	}
	var st api.Status
	decodeJSON(t, out, &st)
	holders := map[string]string{}
	for _, g := range st.GPUs {
		holders[g.ID] = g.Compute
	}
	for _, g := range strings.Split(fieldOf(da), ",") {
		if holders[g] != "e2e-team/gpu-a" {
			t.Fatalf("status -o json says GPU %s is held by %q; want e2e-team/gpu-a (%s)", g, holders[g], out)
		}
	}
	if out, _ := u.cli("status"); !strings.Contains(out, "gpus:      4") || !strings.Contains(out, "(e2e-team/gpu-b)") {
		t.Fatalf("status does not list the GPUs and their holders:\n%s", out)
	}

	if out, code := u.cli("job", "cancel", "--workspace", "e2e-team", a); code != 0 {
		t.Fatalf("job cancel: exit %d: %s", code, out)
	}
	if dc := devices(c); fieldOf(dc) != fieldOf(da) {
		t.Fatalf("the third node sees %q once the first was released; want the first's %q", dc, da)
	}
	u.waitFor("the third job completes", 30*time.Second, func() bool { return show(c).Status == api.JobCompleted })
	if out, code := u.cli("job", "cancel", "--workspace", "e2e-team", b); code != 0 {
		t.Fatalf("job cancel: exit %d: %s", code, out)
	}
	u.mustTerraform("destroy", "-auto-approve")
}

// fieldOf is the CUDA list of a "LIST nvidia=LIST" line.
func fieldOf(line string) string { f, _, _ := strings.Cut(line, " "); return f }

// disjointPairs reports whether two "A,B nvidia=A,B" lines name two GPUs each, the same
// for CUDA and NVIDIA, and none in common.
func disjointPairs(x, y string) bool {
	seen := map[string]bool{}
	for _, line := range []string{x, y} {
		cuda, nvidia, _ := strings.Cut(line, " nvidia=")
		gpus := strings.Split(cuda, ",")
		if cuda != nvidia || len(gpus) != 2 {
			return false
		}
		for _, g := range gpus {
			if seen[g] {
				return false
			}
			seen[g] = true
		}
	}
	return true
}
