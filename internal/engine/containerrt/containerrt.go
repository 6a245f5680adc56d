//go:build linux

package containerrt

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/platforms"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

const (
	// snapshotter unpacks images; overlayfs is containerd's default on Linux.
	snapshotter = "overlayfs"
	// killGrace is how long a container's process has between SIGTERM and SIGKILL: less
	// than the 10 s the SSH and Slurm drivers' kill gives container-run itself, so that it
	// still removes the container before its own SIGKILL.
	killGrace = 8 * time.Second
)

// Runtime is a connection to one machine's containerd.
type Runtime struct {
	client   *containerd.Client
	address  string
	engineID string
}

// Open connects to the containerd at address (its gRPC socket) for the engine engineID, in
// the engine's namespace.
func Open(ctx context.Context, address, engineID string) (*Runtime, error) {
	return OpenIn(ctx, address, Namespace, engineID)
}

// OpenIn is Open in another containerd namespace: KubernetesNamespace imports an image
// where a Kubernetes node's kubelet finds it.
func OpenIn(ctx context.Context, address, namespace, engineID string) (*Runtime, error) {
	if _, err := os.Stat(address); err != nil {
		return nil, fmt.Errorf("%w: containerd's socket %s: %v", ErrNoRuntime, address, err)
	}
	c, err := containerd.New(address, containerd.WithDefaultNamespace(namespace), containerd.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("%w: containerd at %s: %v", ErrNoRuntime, address, err)
	}
	if _, err := c.Version(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: containerd at %s does not answer: %v", ErrNoRuntime, address, err)
	}
	return &Runtime{client: c, address: address, engineID: engineID}, nil
}

// Close closes the connection.
func (r *Runtime) Close() error { return r.client.Close() }

// Import makes sure the image of the archive is in containerd, unpacked, under
// ImageName(hash), and reports whether it had to import it (false: it was there already,
// from an earlier task on this machine).
func (r *Runtime) Import(ctx context.Context, archive, hash string) (imported bool, err error) {
	name := ImageName(hash)
	if img, err := r.client.GetImage(ctx, name); err == nil {
		if ok, err := img.IsUnpacked(ctx, snapshotter); err == nil && ok {
			return false, nil
		}
	}
	imgs, err := r.importArchive(ctx, archive, name)
	if err != nil {
		return false, fmt.Errorf("import %s into containerd: %w", archive, err)
	}
	for _, i := range imgs {
		if i.Name != name {
			// The archive's own tags (RepoTags, ref.name) are not the engine's names.
			_ = r.client.ImageService().Delete(ctx, i.Name)
		}
	}
	img, err := r.client.GetImage(ctx, name)
	if err != nil {
		return false, fmt.Errorf("the imported archive %s: %w", archive, err)
	}
	if err := img.Unpack(ctx, snapshotter); err != nil {
		return false, fmt.Errorf("unpack the image of %s: %w", archive, err)
	}
	return true, nil
}

// importArchive imports the archive's image under name (and the archive's own names). Two
// tasks that start together on a machine import the same archive at once, and containerd's
// import makes a missing image record with a create, which fails for the second one: it
// finds the record made and imports again, which updates it instead.
func (r *Runtime) importArchive(ctx context.Context, archive, name string) ([]images.Image, error) {
	for attempt := 1; ; attempt++ {
		f, err := os.Open(archive)
		if err != nil {
			return nil, err
		}
		imgs, err := r.client.Import(ctx, f, containerd.WithIndexName(name), containerd.WithImportPlatform(platforms.DefaultStrict()))
		f.Close()
		if err == nil || !errdefs.IsAlreadyExists(err) || attempt == 3 {
			return imgs, err
		}
	}
}

// ImportedHashes lists the content hashes of the environment images imported on this
// machine (ImageName), whichever engine imported them.
func (r *Runtime) ImportedHashes(ctx context.Context) ([]string, error) {
	imgs, err := r.client.ImageService().List(ctx)
	if err != nil {
		return nil, err
	}
	var hashes []string
	for _, img := range imgs {
		if h, ok := strings.CutPrefix(img.Name, ImageName("")); ok && h != "" {
			hashes = append(hashes, h)
		}
	}
	return hashes, nil
}

// RemoveImage removes the environment image imported under hash, and with it its content
// and unpacked layers, which containerd collects once no container uses them. An image
// that is not there is no error.
func (r *Runtime) RemoveImage(ctx context.Context, hash string) error {
	err := r.client.ImageService().Delete(ctx, ImageName(hash), images.SynchronousDelete())
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// Pull makes sure the image ref is in containerd, unpacked: found there (imported or pulled
// before, unpacked now if it was not), or pulled from its registry. An image that is neither
// is an error naming it. An image found is never checked against its registry: that is how
// an operator provides an image whose registry needs credentials.
func (r *Runtime) Pull(ctx context.Context, ref string) (pulled bool, err error) {
	if img, err := r.client.GetImage(ctx, ref); err == nil {
		if ok, err := img.IsUnpacked(ctx, snapshotter); err == nil && ok {
			return false, nil
		}
		if err := img.Unpack(ctx, snapshotter); err != nil {
			return false, fmt.Errorf("unpack image %q: %w", ref, err)
		}
		return false, nil
	}
	if _, err := r.client.Pull(ctx, ref, containerd.WithPullUnpack, containerd.WithPullSnapshotter(snapshotter)); err != nil {
		return false, fmt.Errorf("image %q cannot be resolved: it is not in this machine's containerd (%s), and pulling it failed: %w", ref, r.address, err)
	}
	return true, nil
}

// Run runs the spec's process in a new container and returns its exit status. The
// container and its snapshot are removed when it ends. A cancelled ctx stops the process
// (SIGTERM, then SIGKILL after a grace period) and still removes the container.
func (r *Runtime) Run(ctx context.Context, s RunSpec) (int, error) {
	img, err := r.client.GetImage(ctx, s.Image)
	if err != nil {
		return -1, fmt.Errorf("the image %s is not on this machine (import or pull it first): %w", s.Image, err)
	}
	mounts := make([]specs.Mount, 0, len(s.Binds))
	for _, b := range s.Binds {
		mounts = append(mounts, specs.Mount{Destination: b, Source: b, Type: "bind", Options: []string{"rbind", "rw"}})
	}
	// A task that a login other than root runs (on a machine reached over SSH, or a Slurm
	// node) runs as that login in its container too: the files it writes in its directory
	// are the login's, as they would be outside a container. oci.WithImageConfig would
	// mount the image's root to read its users and groups, which only root may; the image's
	// environment and working directory are all such a task takes from it.
	uid := os.Getuid()
	fromImage := oci.WithImageConfig(img)
	if uid != 0 {
		fromImage = withImageEnv(img, uint32(uid), uint32(os.Getgid()))
	}
	opts := []oci.SpecOpts{
		fromImage, oci.WithHostNamespace(specs.NetworkNamespace), oci.WithHostHostsFile, oci.WithHostResolvconf,
		oci.WithProcessArgs(s.Args...), oci.WithEnv(s.Env), oci.WithMounts(mounts),
	}
	if s.Cwd != "" {
		opts = append(opts, oci.WithProcessCwd(s.Cwd))
	}
	for _, d := range s.Devices {
		opts = append(opts, oci.WithLinuxDevice(d, "rwm"))
	}
	// Such a task's output FIFOs are made where the login may write (containerd's own FIFO
	// directory is root's).
	ioOpts := []cio.Opt{cio.WithStreams(nil, s.Stdout, s.Stderr)}
	if uid != 0 {
		ioOpts = append(ioOpts, cio.WithFIFODir(os.TempDir()))
	}
	// The container and its task are created, started and cleaned up detached from ctx: a
	// call cancelled on the client can still complete in containerd, leaving a container
	// (or a task that keeps its container from being deleted) that no defer here would
	// remove. A cancellation is looked at between the steps and while the task runs.
	bg := context.WithoutCancel(ctx)
	taskLabel := s.Task
	if taskLabel == "" {
		taskLabel = s.ID
	}
	c, err := r.client.NewContainer(bg, s.ID,
		containerd.WithImage(img), containerd.WithNewSnapshot(s.ID, img),
		containerd.WithContainerLabels(map[string]string{LabelEngine: r.engineID, LabelTask: taskLabel}),
		containerd.WithNewSpec(opts...))
	if err != nil {
		return -1, fmt.Errorf("create container %s: %w", s.ID, err)
	}
	defer func() { _ = c.Delete(bg, containerd.WithSnapshotCleanup) }()
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	task, err := c.NewTask(bg, cio.NewCreator(ioOpts...))
	if err != nil {
		return -1, fmt.Errorf("create the task of container %s: %w", s.ID, err)
	}
	defer func() { _, _ = task.Delete(bg, containerd.WithProcessKill) }()
	exited, err := task.Wait(bg)
	if err != nil {
		return -1, err
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	if err := task.Start(bg); err != nil {
		return -1, fmt.Errorf("start container %s: %w", s.ID, err)
	}
	// ended is the exit status once the process's output is all copied: the status can
	// come before the last of the output.
	ended := func(st containerd.ExitStatus) int {
		task.IO().Wait()
		code, _, _ := st.Result()
		return int(code)
	}
	select {
	case st := <-exited:
		return ended(st), st.Error()
	case <-ctx.Done():
	}
	_ = task.Kill(bg, syscall.SIGTERM)
	select {
	case st := <-exited:
		return ended(st), ctx.Err()
	case <-time.After(killGrace):
	}
	_ = task.Kill(bg, syscall.SIGKILL)
	return ended(<-exited), ctx.Err()
}

// Sweep removes every container of this engine whose task keep does not record (a crash or
// a failed start left it), with its process and snapshot, and returns their IDs.
func (r *Runtime) Sweep(ctx context.Context, keep func(task string) bool) ([]string, error) {
	return r.sweep(ctx, func(c containerd.Container) bool {
		labels, err := c.Labels(ctx)
		return err != nil || keep(labels[LabelTask])
	})
}

// SweepEnded removes every container of this engine whose process has stopped, with its
// snapshot, and returns their IDs: a task's process that was killed before it could delete
// its container (RunTask) leaves such a record. A container whose process runs, or that
// is being started (no process yet, or one created and not started), is kept.
func (r *Runtime) SweepEnded(ctx context.Context) ([]string, error) {
	return r.sweep(ctx, func(c containerd.Container) bool {
		task, err := c.Task(ctx, nil)
		if err != nil {
			return true
		}
		st, err := task.Status(ctx)
		return err != nil || st.Status != containerd.Stopped
	})
}

func (r *Runtime) sweep(ctx context.Context, keep func(containerd.Container) bool) ([]string, error) {
	cs, err := r.client.Containers(ctx, fmt.Sprintf("labels.%q==%s", LabelEngine, r.engineID))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, c := range cs {
		if keep(c) {
			continue
		}
		if task, err := c.Task(ctx, nil); err == nil {
			_, _ = task.Delete(ctx, containerd.WithProcessKill)
		} else if !errdefs.IsNotFound(err) {
			return removed, err
		}
		if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
			return removed, err
		}
		removed = append(removed, c.ID())
	}
	return removed, nil
}

// Containers lists the IDs of this engine's containers on the machine.
func (r *Runtime) Containers(ctx context.Context) ([]string, error) {
	cs, err := r.client.Containers(ctx, fmt.Sprintf("labels.%q==%s", LabelEngine, r.engineID))
	ids := make([]string, 0, len(cs))
	for _, c := range cs {
		ids = append(ids, c.ID())
	}
	return ids, err
}

// withImageEnv sets the process's environment and working directory from the image's
// config, as oci.WithImageConfig does, and its user to uid and gid, without mounting the
// image (see Run).
func withImageEnv(img containerd.Image, uid, gid uint32) oci.SpecOpts {
	return func(ctx context.Context, client oci.Client, c *containers.Container, s *oci.Spec) error {
		config, err := img.Spec(ctx)
		if err != nil {
			return fmt.Errorf("reading the config of image %s: %w", img.Name(), err)
		}
		if s.Process == nil {
			s.Process = &specs.Process{}
		}
		if err := oci.WithEnv(config.Config.Env)(ctx, client, c, s); err != nil {
			return err
		}
		s.Process.Cwd = config.Config.WorkingDir
		if s.Process.Cwd == "" {
			s.Process.Cwd = "/"
		}
		s.Process.User = specs.User{UID: uid, GID: gid}
		return nil
	}
}
