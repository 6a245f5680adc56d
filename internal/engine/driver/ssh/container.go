package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
)

// ContainerRunner runs tasks in container images on machines the engine reaches through a
// Shell (attached machines, and the nodes of a Slurm cluster through its login host), with
// the same code the engine's local nodes use: the engine's own binary, copied to the machine
// once per build, runs the task as its container-run command against the machine's
// containerd (containerrt.MachineAddress: MLCOMPUTE_CONTAINERD_ADDRESS in the environment
// the machine gives the task, else containerd's default socket). An image archive is copied
// once per content hash, and imported once per machine by the first task that needs it.
//
// The machine must be Linux on the engine's architecture; another one is refused with an
// error that says so.
type ContainerRunner struct {
	// Binary is the engine's executable; Args are the words after it that make it the
	// container-run command (["container-run"], or ["engine", "container-run"] for the
	// provider's binary).
	Binary string
	Args   []string
	// EngineID labels the containers, as the local nodes' do.
	EngineID string

	once   sync.Once
	digest string
	err    error
}

// binaryDigest is the binary's SHA-256, read once: the name of its copy on machines.
func (r *ContainerRunner) binaryDigest() (string, error) {
	r.once.Do(func() {
		f, err := os.Open(r.Binary)
		if err != nil {
			r.err = fmt.Errorf("reading the engine's binary: %w", err)
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			r.err = fmt.Errorf("reading the engine's binary: %w", err)
			return
		}
		r.digest = hex.EncodeToString(h.Sum(nil))
	})
	return r.digest, r.err
}

// machineName is how `uname -sm` names a Linux machine of architecture goarch.
func machineName(goarch string) string {
	switch goarch {
	case "amd64":
		return "Linux x86_64"
	case "arm64":
		return "Linux aarch64"
	case "386":
		return "Linux i686"
	}
	return "Linux " + goarch
}

// Command returns the command that runs command in the task's image c on the machine sh
// reaches, as task key, after copying there (below dir, a directory the machine's tasks
// share: ~/.mlcompute, or the Slurm work dir's .mlcompute) what the machine lacks: the
// engine's binary and the image archive. The command runs in the task's working directory,
// which the container sees at the same path.
func (r *ContainerRunner) Command(ctx context.Context, sh Shell, dir, key string, c *driver.TaskContainer, command []string) ([]string, error) {
	digest, err := r.binaryDigest()
	if err != nil {
		return nil, err
	}
	files := []remoteFile{{local: r.Binary, name: "bin/mlcompute-" + digest[:16], mode: "0755"}}
	if c.Archive != "" {
		files = append(files, remoteFile{local: c.Archive, name: "images/" + c.Hash + ".tar", mode: "0600"})
	}
	paths, err := putOnce(ctx, sh, dir, machineName(runtime.GOARCH), files)
	if err != nil {
		return nil, err
	}
	tc := nodeagent.TaskContainer{EngineID: r.EngineID, Key: key, Image: c.Image, Hash: c.Hash, EnvCache: c.EnvCache, Mounts: c.Mounts}
	if c.Archive != "" {
		tc.Image, tc.Archive = "", paths[1]
	}
	runner := append([]string{paths[0]}, r.Args...)
	return nodeagent.ContainerRunArgv(runner, tc, "", "", command), nil
}

// ImportImage imports the image archive of content hash hash into the containerd at
// address (a socket on the machine sh reaches), in its namespace, under the name tasks run
// it by (containerrt.ImageName): the engine's binary and the archive are copied below dir
// as for Command, and the binary's container-import command imports the image, once (an
// image already there, unpacked, is kept). A Kubernetes node's kubelet finds it there
// (containerrt.KubernetesNamespace).
func (r *ContainerRunner) ImportImage(ctx context.Context, sh Shell, dir, archive, hash, address, namespace string) error {
	digest, err := r.binaryDigest()
	if err != nil {
		return err
	}
	paths, err := putOnce(ctx, sh, dir, machineName(runtime.GOARCH), []remoteFile{
		{local: r.Binary, name: "bin/mlcompute-" + digest[:16], mode: "0755"},
		{local: archive, name: "images/" + hash + ".tar", mode: "0600"},
	})
	if err != nil {
		return err
	}
	argv := append([]string{paths[0]}, r.Args[:len(r.Args)-1]...)
	argv = append(argv, nodeagent.ContainerImportCommand, "--address", address, "--namespace", namespace, "--archive", paths[1], "--hash", hash)
	var out strings.Builder
	stderr, code, err := sh.RunShell(ctx, shellWords(argv)+" 2>&1", nil, &out)
	if err != nil {
		return fmt.Errorf("importing the image archive: %w", err)
	}
	if code != 0 {
		return driver.Permanent(fmt.Errorf("importing the image archive: exit status %d: %s", code, strings.TrimSpace(out.String()+string(stderr))))
	}
	return nil
}

// remoteFile is a local file to copy to dir/name on a machine, unless it is there.
type remoteFile struct {
	local, name, mode string
}

// putOnce makes sure each file is on the machine below dir and returns their absolute
// paths there. A file already there is not copied again (its name holds its content's
// digest); one is copied to a temporary name and renamed, so a copy cut short never
// passes for the file. The machine must be `uname -sm` machine.
func putOnce(ctx context.Context, sh Shell, dir, machine string, files []remoteFile) ([]string, error) {
	var probe strings.Builder
	fmt.Fprintf(&probe, "uname -sm; mkdir -p %s && cd %s && pwd -P || exit 1\n", shellQuote(dir), shellQuote(dir))
	for _, f := range files {
		fmt.Fprintf(&probe, "test -f %s && echo have || echo missing\n", shellQuote(f.name))
	}
	var out strings.Builder
	stderr, code, err := sh.RunShell(ctx, "sh -s", strings.NewReader(probe.String()), &out)
	if err != nil {
		return nil, fmt.Errorf("looking for the container runner on the machine: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 0 || len(lines) != 2+len(files) {
		return nil, fmt.Errorf("looking for the container runner on the machine: exit status %d: %s", code, strings.TrimSpace(string(stderr)))
	}
	if got := strings.TrimSpace(lines[0]); got != machine {
		return nil, driver.Permanent(fmt.Errorf("the machine is %q, and container tasks run there with this engine's own binary, built for %q: "+
			"run them on a machine of the engine's system and architecture", got, machine))
	}
	abs := strings.TrimSpace(lines[1])
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = path.Join(abs, f.name)
		if strings.TrimSpace(lines[2+i]) == "have" {
			continue
		}
		if err := putFile(ctx, sh, f.local, paths[i], f.mode); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// putFile copies the local file to dst (absolute) on the machine, through a temporary name.
func putFile(ctx context.Context, sh Shell, local, dst, mode string) error {
	src, err := os.Open(local)
	if err != nil {
		return fmt.Errorf("copying %s to the machine: %w", path.Base(local), err)
	}
	defer src.Close()
	q := shellQuote(dst)
	cmd := fmt.Sprintf(`mkdir -p "$(dirname %[1]s)" && t=$(mktemp %[1]s.XXXXXX) && cat > "$t" && chmod %[2]s "$t" && mv -f "$t" %[1]s || { rm -f "$t"; exit 1; }`, q, mode)
	stderr, code, err := sh.RunShell(ctx, cmd, src, io.Discard)
	if err != nil {
		return fmt.Errorf("copying %s to the machine: %w", path.Base(local), err)
	}
	if code != 0 {
		return fmt.Errorf("copying %s to the machine: exit status %d: %s", path.Base(local), code, strings.TrimSpace(string(stderr)))
	}
	return nil
}
