package jobs_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// A backup is the store's copy and the blobs it references, even when the job is deleted
// (and its blobs collected) between the copy and the blobs' turn in the archive: the
// blobs are held from the copy's transaction until they are written. Extracted into an
// empty data dir, the archive gives the job back with an output that verifies and
// downloads as written; once the backup is over, the held blobs go at the next collection.
func TestABackupKeepsTheBlobsItsStoreCopyReferences(t *testing.T) {
	env, c, st := setupFiles(t)
	j, digest := completeWithModel(t, env, c, "train")

	restored := t.TempDir()
	pr, pw := io.Pipe()
	extracted := make(chan error, 1)
	go func() {
		extracted <- extract(pr, restored, func(name string) error {
			if name != "state.db" {
				return nil
			}
			// The store's copy is written; the blobs are not yet: delete the job now.
			return c.DeleteJob(context.Background(), "lab", j.ID)
		})
		pr.Close()
	}()
	err := c.Backup(context.Background(), pw, "state.db", "artifacts", "snapshots")
	pw.CloseWithError(err)
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if err := <-extracted; err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(context.Background(), "lab", j.ID); !api.IsNotFound(err) {
		t.Fatalf("the job was not deleted during the backup: %v", err)
	}

	// The restored data dir: the job and its output, whole.
	rs, err := store.Open(filepath.Join(restored, "state.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var rec model.Job
	_ = rs.View(func(tx *store.Tx) error { rec, _ = model.GetJob(tx, "lab", j.ID); return nil })
	if rec.Outputs["model"].Digest != digest {
		t.Fatalf("the backup's job has output %+v; want digest %s", rec.Outputs["model"], digest)
	}
	ra, err := artifacts.Open(filepath.Join(restored, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.Verify(context.Background(), digest); err != nil {
		t.Fatalf("the backup's output does not verify: %v", err)
	}
	var buf bytes.Buffer
	if err := ra.WriteTar(context.Background(), &buf, digest); err != nil {
		t.Fatal(err)
	}
	if got := tarFiles(t, &buf); fmt.Sprint(got) != fmt.Sprint(modelFiles) {
		t.Fatalf("the restored output holds %v; want %v", got, modelFiles)
	}
	if _, blobs := ra.Usage(); blobs != 3 { // two distinct files and the manifest
		t.Fatalf("the backup holds %d blobs; want the 3 the output references", blobs)
	}

	// The backup is over: nothing holds the deleted job's blobs any more.
	if _, _, err := c.CollectArtifacts(); err != nil {
		t.Fatal(err)
	}
	if bytes, blobs := st.Usage(); bytes != 0 || blobs != 0 {
		t.Fatalf("after the backup the engine's store holds %d bytes in %d blobs; want none", bytes, blobs)
	}
}

// extract writes a tar stream's directories and regular files below dir, calling after
// with each regular file's name once it is written.
func extract(r io.Reader, dir string, after func(name string) error) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return err
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				return err
			}
			if err := after(hdr.Name); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected entry %q", hdr.Name)
		}
	}
}
