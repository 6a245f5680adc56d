package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The machine's GPUs that local nodes get (DESIGN 4): the operator's list (serve --gpus),
// fake devices for tests (--fake-gpus), or those found on the machine.

// MaxFakeGPUs bounds --fake-gpus.
const MaxFakeGPUs = 64

// gpuID is what a GPU of --gpus may be: an index ("0") or a UUID ("GPU-8f3c...", "MIG-...").
var gpuID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:_.-]*$`)

// ParseGPUs parses --gpus: GPU indices or UUIDs, comma-separated, each once.
func ParseGPUs(s string) ([]string, error) {
	var out []string
	for _, g := range strings.Split(s, ",") {
		g = strings.TrimSpace(g)
		if !gpuID.MatchString(g) {
			return nil, fmt.Errorf("--gpus %q: %q is not a GPU; give indices or UUIDs as nvidia-smi -L shows them, comma-separated (e.g. --gpus 0,1)", s, g)
		}
		if slices.Contains(out, g) {
			return nil, fmt.Errorf("--gpus %q: GPU %s is named twice", s, g)
		}
		out = append(out, g)
	}
	return out, nil
}

// FakeGPUs is n fake devices, numbered from 0 as CUDA numbers them.
func FakeGPUs(n int) ([]string, error) {
	if n < 0 || n > MaxFakeGPUs {
		return nil, fmt.Errorf("--fake-gpus must be between 0 and %d, got %d", MaxFakeGPUs, n)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out, nil
}

// machineGPUs is Options' GPUs: the operator's list or fake devices, else what the machine
// has (nvidia-smi -L, else /dev/nvidia<N>); none for nodes that are not local.
func machineGPUs(ctx context.Context, opts Options) ([]string, error) {
	switch {
	case opts.Nodes != "" && opts.Nodes != "local":
		return nil, nil
	case opts.GPUs != nil:
		return opts.GPUs, nil
	case opts.FakeGPUs > 0:
		return FakeGPUs(opts.FakeGPUs)
	}
	return DiscoverGPUs(ctx, "nvidia-smi", "/dev"), nil
}

// DiscoverGPUs finds the machine's GPUs: the indices `smi -L` lists, or when it cannot run,
// the N of each devDir/nvidiaN device. A machine with neither has none.
func DiscoverGPUs(ctx context.Context, smi, devDir string) []string {
	if path, err := exec.LookPath(smi); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, path, "-L").Output(); err == nil {
			return parseSMIList(out)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(devDir, "nvidia*"))
	var idx []int
	for _, m := range matches {
		if n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(m), "nvidia")); err == nil {
			if fi, err := os.Stat(m); err == nil && fi.Mode()&os.ModeDevice != 0 {
				idx = append(idx, n)
			}
		}
	}
	slices.Sort(idx)
	out := make([]string, 0, len(idx))
	for _, n := range idx {
		out = append(out, strconv.Itoa(n))
	}
	return out
}

// parseSMIList reads the indices of `nvidia-smi -L`'s "GPU 0: NVIDIA A100 (UUID: GPU-...)" lines.
func parseSMIList(out []byte) []string {
	var gpus []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "GPU ")
		if !ok {
			continue
		}
		n, _, ok := strings.Cut(rest, ":")
		if _, err := strconv.Atoi(n); ok && err == nil {
			gpus = append(gpus, n)
		}
	}
	return gpus
}
