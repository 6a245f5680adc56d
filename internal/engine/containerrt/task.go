package containerrt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Task is one task's process in a container, as the process that runs it on the node is
// told (the node agent's task process, so that the agent's wrapper records its exit status
// and its kill stops it).
type Task struct {
	// Address is the machine's containerd socket; EngineID labels the container.
	Address  string
	EngineID string
	// Key is the task's key (the container's mlcompute.task label).
	Key string
	// Archive is the image archive on this machine; Hash is the environment's content
	// hash, the name it is imported under once per machine. Without an archive, Image is
	// the image's reference, pulled when the machine does not have it.
	Archive string
	Image   string
	Hash    string
	// Cwd is the process's working directory; Binds are host paths mounted at the same
	// paths (the task's directory, which holds its code, inputs and outputs).
	Cwd   string
	Binds []string
	Args  []string
	// Env is the task's environment ("NAME=value"). PATH is left to the image.
	Env []string
	// DevDir is where the machine's device nodes are ("/dev" when empty): the GPUs that
	// NVIDIA_VISIBLE_DEVICES names in Env are given to the container from there.
	DevDir string
}

// ContainerID is the container ID of task key of engine engineID: containerd allows fewer
// characters in an ID than a task key holds, so it is a digest (the key itself is a label).
// The engine's ID is in it because runc keeps its containers' state in one directory per
// machine, whichever containerd asked: two engines' tasks of one key must not collide.
func ContainerID(engineID, key string) string {
	sum := sha256.Sum256([]byte(engineID + "\x00" + key))
	return "mlc-" + hex.EncodeToString(sum[:16])
}

// RunTask imports the task's image (once per hash on the machine) and runs its process in a
// container, with its output to stdout and stderr, and returns the process's exit status.
// A cancelled ctx stops the container (Run).
func RunTask(ctx context.Context, t Task, stdout, stderr io.Writer) (int, error) {
	if t.Address == "" || t.EngineID == "" || t.Key == "" || (t.Archive == "") == (t.Image == "") || t.Hash == "" || len(t.Args) == 0 {
		return -1, errors.New("a container task needs an address, engine ID, key, archive or image, hash and command")
	}
	rt, err := Open(ctx, t.Address, t.EngineID)
	if err != nil {
		return -1, err
	}
	defer rt.Close()
	image := t.Image
	if t.Archive != "" {
		image = ImageName(t.Hash)
		_, err = rt.Import(ctx, t.Archive, t.Hash)
	} else {
		_, err = rt.Pull(ctx, t.Image)
	}
	if err != nil {
		return -1, err
	}
	env := make([]string, 0, len(t.Env))
	for _, kv := range t.Env {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	devDir := t.DevDir
	if devDir == "" {
		devDir = "/dev"
	}
	code, err := rt.Run(ctx, RunSpec{
		ID: ContainerID(t.EngineID, t.Key), Task: t.Key, Image: image, Args: t.Args, Env: env,
		Cwd: t.Cwd, Binds: t.Binds, Devices: GPUDevices(devDir, t.Env), Stdout: stdout, Stderr: stderr,
	})
	if err != nil && code < 0 {
		if strings.Contains(err.Error(), "executable file not found") {
			return code, fmt.Errorf("running task %s in a container: the image has no %q on its PATH: %w", t.Key, t.Args[0], err)
		}
		return code, fmt.Errorf("running task %s in a container: %w", t.Key, err)
	}
	return code, err
}

// gpuControlDevices are the NVIDIA driver's device nodes every process that uses a GPU opens
// besides the GPU's own.
var gpuControlDevices = []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}

// GPUDevices are the device nodes under devDir of the GPUs that env's
// NVIDIA_VISIBLE_DEVICES names (the indices a local node holds, as the engine hands them
// out), with the driver's control devices, those of them that exist: a container sees its
// node's GPUs and no other. A GPU named by UUID has no device file of its own name, so it
// gets none here (the variable still reaches the container, for the NVIDIA container
// toolkit where a machine has it); "void", "none" and empty give none.
func GPUDevices(devDir string, env []string) []string {
	var visible string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "NVIDIA_VISIBLE_DEVICES="); ok {
			visible = v
		}
	}
	var devices []string
	for _, id := range strings.Split(visible, ",") {
		if id = strings.TrimSpace(id); id == "" || strings.Trim(id, "0123456789") != "" {
			continue
		}
		if p := filepath.Join(devDir, "nvidia"+id); exists(p) {
			devices = append(devices, p)
		}
	}
	if len(devices) == 0 {
		return nil
	}
	for _, name := range gpuControlDevices {
		if p := filepath.Join(devDir, name); exists(p) {
			devices = append(devices, p)
		}
	}
	return devices
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
