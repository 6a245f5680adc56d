//go:build unix

package local

import (
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// TestTasksSeeOnlyTheirNodesGPUs: a node's GPUs reach every task on it, over the task's
// own variables; a node given an empty list sees none; a node given no list is left as
// the machine is.
func TestTasksSeeOnlyTheirNodesGPUs(t *testing.T) {
	d := newDriver(t, "")
	ctx := ctxT(t)
	for _, tc := range []struct {
		key  string
		gpus []string
		want string
	}{
		{"gpu2", []string{"1", "3"}, "[1,3] [1,3]\n"},
		{"cpu", []string{}, "[] [void]\n"},
		{"plain", nil, "[unset] [unset]\n"},
	} {
		if _, err := d.Create(ctx, driver.NodeSpec{Key: tc.key, Owner: "ws/c", VMSize: "Standard_NC12s_v3", VCPUs: 12, GPUs: tc.gpus}); err != nil {
			t.Fatalf("create %s: %v", tc.key, err)
		}
		// The task's own CUDA_VISIBLE_DEVICES does not unmask the machine's other GPUs.
		err := d.StartTask(ctx, tc.key, driver.TaskSpec{Key: "t", Env: map[string]string{"CUDA_VISIBLE_DEVICES": "unset"},
			Command: []string{"sh", "-c", `echo "[${CUDA_VISIBLE_DEVICES}] [${NVIDIA_VISIBLE_DEVICES-unset}]"`}})
		if err != nil {
			t.Fatal(err)
		}
		if ev := nextEvent(t, d); ev.Kind != driver.TaskExited || ev.ExitCode != 0 {
			t.Fatalf("event %+v", ev)
		}
		out, err := d.TaskOutput(ctx, tc.key, "t", 0)
		if err != nil || string(out) != tc.want {
			t.Fatalf("node %s (GPUs %#v): task saw %q %v; want %q", tc.key, tc.gpus, out, err, tc.want)
		}
	}
}
