package jobs

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tarball"
)

// A job's outputs leave its node when rank 0 exits with status 0: rank 0's outputs are
// the job's (as in Azure ML, where one node's upload is what a job's output holds). The
// controller fetches each through the driver (or reads the engine's own directory of a
// rw_mount output), takes it into the artifacts store, and only then writes: the
// intake's blobs are pinned until that write committed. When rank 0's exit ends the job,
// that one write marks it Completed and registers the outputs; when other ranks still
// run, the write keeps them as the job's pending outputs, which Finish registers when the
// job ends Completed and drops at any other end. Nothing is registered at another exit,
// and what an interrupted or dropped intake wrote goes at the next collection.

// takeOutputs takes each of the job's outputs from rank 0's node into the store. On
// error every intake is released and the error names the output (and the file).
func (c *Controller) takeOutputs(ctx context.Context, j model.Job, nodeID string) (map[string]api.JobOutput, []*artifacts.Intake, error) {
	if c.cfg.Artifacts == nil {
		return nil, nil, errors.New("this engine keeps no artifacts store")
	}
	taken := map[string]api.JobOutput{}
	var intakes []*artifacts.Intake
	fail := func(err error) (map[string]api.JobOutput, []*artifacts.Intake, error) {
		for _, in := range intakes {
			in.Release()
		}
		return nil, nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(j.Outputs)) {
		out := j.Outputs[name]
		r, err := c.openOutput(ctx, j, nodeID, name, out)
		if err != nil {
			return fail(fmt.Errorf("output %q: %w", name, err))
		}
		in, err := c.cfg.Artifacts.Intake(ctx, out.Type, r, c.cfg.MaxOutputSize)
		_ = r.Close()
		if err != nil {
			return fail(fmt.Errorf("output %q: %w", name, err))
		}
		intakes = append(intakes, in)
		out.Digest, out.Size, out.FileCount = in.Digest, in.Size, int64(in.FileCount)
		taken[name] = out
		c.log.Info("output taken in", "job", j.ID, "output", name, "digest", in.Digest, "size", in.Size, "files", in.FileCount, "stored_bytes", in.StoredBytes)
	}
	return taken, intakes, nil
}

// openOutput opens an output as a tar stream: through the driver, or from the engine's
// own directory for a rw_mount output.
func (c *Controller) openOutput(ctx context.Context, j model.Job, nodeID, name string, out api.JobOutput) (io.ReadCloser, error) {
	if out.Mode == api.ModeRWMount {
		root := c.core.MountPath(j.Job, model.OutputsDir, name)
		if out.Type == api.URIFile {
			root = filepath.Join(root, name) // the one file, named after the output (ioPath)
		}
		return driver.StreamOutput(ctx, func(ctx context.Context, w io.Writer) error {
			return tarball.Write(ctx, w, root, tarball.Options{Shown: name})
		}), nil
	}
	return c.core.Tasks().FetchOutput(ctx, nodeID, j.TaskKey(0), model.OutputRel(name, out))
}

// collecting keeps a collection from running between an intake's commit and its
// release: an intake holds it shared from its start until its blobs are released.
type collecting struct{ sync.RWMutex }

// CollectArtifacts removes the blobs nothing references: a job's registered output, a
// running job's pending output, an input of a job that has not ended, or an online
// endpoint's model (a deployment's, or a running instance's).
func (c *Controller) CollectArtifacts() (blobs int, bytes int64, err error) {
	if c.cfg.Artifacts == nil {
		return 0, 0, nil
	}
	c.collect.Lock()
	defer c.collect.Unlock()
	var referenced []string
	err = c.core.View(func(tx *store.Tx) (err error) {
		referenced, err = referencedArtifacts(tx)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	blobs, bytes, err = c.cfg.Artifacts.Collect(referenced)
	if err == nil && blobs > 0 {
		c.log.Info("artifacts collected", "blobs", blobs, "bytes", bytes)
	}
	return blobs, bytes, err
}

// referencedArtifacts lists the manifest digests the records reference: jobs' registered
// and pending outputs and inputs, and online endpoints' models.
func referencedArtifacts(tx *store.Tx) ([]string, error) {
	var referenced []string
	jobs, err := store.List[model.Job](tx, store.Jobs, "")
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		referenced = append(referenced, j.ArtifactDigests()...)
	}
	endpoints, err := store.List[model.Endpoint](tx, store.Endpoints, "")
	if err != nil {
		return nil, err
	}
	for _, e := range endpoints {
		referenced = append(referenced, e.ModelDigests()...)
	}
	return referenced, nil
}

// Backup writes a backup of the engine's data to w as a tar stream: the store's records
// as stateName (a consistent copy, as of one read transaction), then every blob those
// records reference below artifactsDir, in the artifact store's own layout, so that the
// archive extracted into an empty data dir gives back jobs whose outputs download. The
// blobs are pinned in the same transaction (no collection runs in between) and until
// they are written: a job deleted meanwhile loses none of them. Then every stored code
// snapshot below snapshotsDir, so jobs rerun and schedules fire after a restore: snapshots
// are never changed once stored and none is ever deleted, so each one the copy names is
// there.
func (c *Controller) Backup(ctx context.Context, w io.Writer, stateName, artifactsDir, snapshotsDir string) error {
	tw := tar.NewWriter(w)
	now := c.core.Clock().Now()
	var blobs []string
	release := func() {}
	defer func() { release() }()
	// The collection lock is taken before the transaction, as CollectArtifacts takes it,
	// and let go as soon as the blobs are pinned.
	c.collect.RLock()
	var once sync.Once
	unlock := func() { once.Do(c.collect.RUnlock) }
	defer unlock()
	err := c.core.View(func(tx *store.Tx) (err error) {
		if c.cfg.Artifacts != nil {
			if blobs, release, err = c.holdReferenced(tx); err != nil {
				return err
			}
		}
		unlock()
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: stateName, Mode: 0o600, Size: tx.Size(), ModTime: now}); err != nil {
			return err
		}
		_, err = tx.WriteTo(tw)
		return err
	})
	if err != nil {
		return fmt.Errorf("backing up the store: %w", err)
	}
	if c.cfg.Artifacts != nil {
		if err := c.cfg.Artifacts.WriteBlobs(ctx, tw, artifactsDir, blobs, now); err != nil {
			return err
		}
	}
	if err := c.backupSnapshots(ctx, tw, snapshotsDir, now); err != nil {
		return err
	}
	return tw.Close()
}

// backupSnapshots writes each stored snapshot's tree below dir/<id>/.
func (c *Controller) backupSnapshots(ctx context.Context, tw *tar.Writer, dir string, now time.Time) error {
	if c.cfg.Snapshots == nil {
		return nil
	}
	ids, err := c.cfg.Snapshots.IDs()
	if err != nil || len(ids) == 0 {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o700, ModTime: now}); err != nil {
		return err
	}
	for _, id := range ids {
		root, err := c.cfg.Snapshots.Path(id)
		if err != nil {
			return fmt.Errorf("backing up snapshot %s: %w", id, err)
		}
		name := path.Join(dir, id)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o700, ModTime: now}); err != nil {
			return err
		}
		if err := tarball.Append(ctx, tw, root, name, tarball.Options{Shown: name}); err != nil {
			return fmt.Errorf("backing up snapshot %s: %w", id, err)
		}
	}
	return nil
}

// holdReferenced pins the blobs tx's records reference. The caller keeps collections out.
func (c *Controller) holdReferenced(tx *store.Tx) (blobs []string, release func(), err error) {
	referenced, err := referencedArtifacts(tx)
	if err != nil {
		return nil, func() {}, err
	}
	blobs, release, err = c.cfg.Artifacts.Hold(referenced)
	if err != nil {
		return nil, func() {}, fmt.Errorf("holding the artifacts the store references: %w", err)
	}
	return blobs, release, nil
}

// JobOutput returns a registered output of a Completed job, refusing, naming which, an
// unknown job or output and a job that is not Completed.
func (c *Controller) JobOutput(_ context.Context, workspace, id, output string) (api.JobOutput, error) {
	var out api.JobOutput
	err := c.core.View(func(tx *store.Tx) (err error) {
		out, err = model.ResolveJobOutput(tx, workspace, api.JobOutputURI(id, output))
		return err
	})
	return out, err
}

// WriteOutput writes a registered output (its manifest digest) to w as a tar stream.
func (c *Controller) WriteOutput(ctx context.Context, w io.Writer, digest string) error {
	if c.cfg.Artifacts == nil {
		return errors.New("this engine keeps no artifacts store")
	}
	return c.cfg.Artifacts.WriteTar(ctx, w, digest)
}

// DeleteJob removes a finished job's record, its logs and its references to outputs,
// then collects the blobs nothing references any more. A job that has not finished is
// refused: cancel it first.
func (c *Controller) DeleteJob(_ context.Context, workspace, id string) error {
	err := c.core.Write(func(tx *store.Tx) error {
		j, ok := model.GetJob(tx, workspace, id)
		if !ok {
			return model.NotFoundJob(workspace, id)
		}
		if !api.Terminal(j.Status) {
			return api.Errorf(api.CodeConflict, "", "job %q is %s; cancel it first (mlcompute job cancel %s), then delete it", id, j.Status, id)
		}
		return tx.Delete(store.Jobs, j.Key())
	})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(c.core.JobDir(id)); err != nil {
		c.log.Error("removing a deleted job's files failed", "job", id, "error", err)
	}
	c.log.Info("job deleted", "job", id, "workspace", workspace)
	if _, _, err := c.CollectArtifacts(); err != nil {
		c.log.Error("collecting artifacts failed", "error", err)
	}
	return nil
}
