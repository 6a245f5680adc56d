package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseGPUs(t *testing.T) {
	for in, want := range map[string][]string{
		"0,1":            {"0", "1"},
		" 2 , 0 ":        {"2", "0"},
		"GPU-8f3c1a2b-1": {"GPU-8f3c1a2b-1"},
	} {
		if got, err := ParseGPUs(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseGPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"0,,1":  `"" is not a GPU`,
		"0,0":   "GPU 0 is named twice",
		"0;rm":  `"0;rm" is not a GPU`,
		"-1":    `"-1" is not a GPU`,
		"a b,c": `"a b" is not a GPU`,
	} {
		if _, err := ParseGPUs(in); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--gpus") {
			t.Errorf("ParseGPUs(%q) = %v; want an error about --gpus saying %s", in, err, want)
		}
	}
}

func TestFakeGPUs(t *testing.T) {
	if got, err := FakeGPUs(4); err != nil || !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Fatalf("FakeGPUs(4) = %v, %v", got, err)
	}
	if _, err := FakeGPUs(MaxFakeGPUs + 1); err == nil || !strings.Contains(err.Error(), "--fake-gpus must be between 0 and 64") {
		t.Fatalf("FakeGPUs beyond the bound: %v", err)
	}
}

// TestDiscoverGPUs runs a stand-in nvidia-smi; without one, regular files named like
// devices do not count (only character devices do).
func TestDiscoverGPUs(t *testing.T) {
	dir := t.TempDir()
	smi := filepath.Join(dir, "nvidia-smi")
	script := "#!/bin/sh\n[ \"$1\" = -L ] || exit 2\n" +
		"echo 'GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-0a1b)'\n" +
		"echo '  MIG 1g.5gb Device 0: (UUID: MIG-1234)'\n" +
		"echo 'GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2c3d)'\n"
	if err := os.WriteFile(smi, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := DiscoverGPUs(context.Background(), smi, dir); !slices.Equal(got, []string{"0", "1"}) {
		t.Fatalf("from nvidia-smi -L: %v; want [0 1]", got)
	}
	for _, f := range []string{"nvidia0", "nvidiactl"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := DiscoverGPUs(context.Background(), filepath.Join(dir, "missing-smi"), dir); len(got) != 0 {
		t.Fatalf("regular files counted as GPUs: %v", got)
	}
}
