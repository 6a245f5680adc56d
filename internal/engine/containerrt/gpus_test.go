package containerrt

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A container gets the device nodes of its node's GPUs (NVIDIA_VISIBLE_DEVICES, indices)
// and the driver's control devices, of those the machine has; no GPU, no device.
func TestGPUDevicesAreTheNodesOwn(t *testing.T) {
	dev := t.TempDir()
	for _, name := range []string{"nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"} {
		if err := os.WriteFile(filepath.Join(dev, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	at := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, filepath.Join(dev, n))
		}
		return out
	}
	for _, tc := range []struct {
		env  []string
		want []string
	}{
		{[]string{"NVIDIA_VISIBLE_DEVICES=2,0", "CUDA_VISIBLE_DEVICES=2,0"}, at("nvidia2", "nvidia0", "nvidiactl", "nvidia-uvm")},
		{[]string{"NVIDIA_VISIBLE_DEVICES=1"}, at("nvidia1", "nvidiactl", "nvidia-uvm")},
		{[]string{"NVIDIA_VISIBLE_DEVICES=7"}, nil},                             // not on this machine
		{[]string{"NVIDIA_VISIBLE_DEVICES=GPU-1f2e3d4c"}, nil},                  // a UUID names no file
		{[]string{"NVIDIA_VISIBLE_DEVICES=void", "CUDA_VISIBLE_DEVICES="}, nil}, // a node without GPUs
		{[]string{"NVIDIA_VISIBLE_DEVICES=../nvidia1"}, nil},
		{nil, nil},
	} {
		if got := GPUDevices(dev, tc.env); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q; want %q", tc.env, got, tc.want)
		}
	}
}
