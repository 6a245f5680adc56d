package cli

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

func newBackupCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent backup of the engine's store, job outputs and code snapshots to FILE while it runs",
		Long: "Write a consistent backup of the engine's store (state.db), of the job outputs it " +
			"references (the artifact store's blobs) and of the code snapshots to FILE while the engine runs, as of one moment: " +
			"a tar archive laid out as the data dir. The archive is written next to FILE, checked " +
			"(the store opens, every blob has its digest), and only then renamed to FILE (mode " +
			"0600). To restore it, stop the engine ('mlcompute shutdown') and extract FILE into the " +
			"data dir: tar -xf FILE -C <data-dir>.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			dest, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".partial-*")
			if err != nil {
				return fmt.Errorf("creating the backup: %w", err)
			}
			defer os.Remove(tmp.Name()) // gone after the rename; removed on any failure
			_, err = c.BackupArchive(cmd.Context(), tmp)
			if err == nil {
				err = tmp.Sync()
			}
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("writing the backup: %w", err)
			}
			sum, err := checkBackup(tmp.Name())
			if err != nil {
				return fmt.Errorf("checking the backup: %w", err)
			}
			if err := os.Rename(tmp.Name(), dest); err != nil {
				return fmt.Errorf("writing the backup: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote a backup of the engine's store (%d bytes), %d artifact blobs (%d bytes) and %d code snapshots to %s\n",
				sum.storeBytes, sum.blobs, sum.blobBytes, len(sum.snapshots), dest)
			return nil
		},
	}
}

type backupSummary struct {
	storeBytes, blobBytes int64
	blobs                 int
	snapshots             map[string]bool
}

// snapshotEntry matches a name inside a code snapshot's tree: snapshots/<its id>/...
var snapshotEntry = regexp.MustCompile(`^` + daemon.SnapshotsDir + `/([0-9a-f]{64})(/.*)?/?$`)

// checkBackup reads a backup archive: its state.db must open as a store, each blob under
// artifacts/blobs/ must have the sha256 it is named by, and everything else must be a
// file, directory or link inside a code snapshot's tree.
func checkBackup(file string) (backupSummary, error) {
	var sum backupSummary
	f, err := os.Open(file)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	sawStore := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, err
		}
		switch {
		case hdr.Name == daemon.StoreFile:
			if err := checkStoreCopy(filepath.Dir(file), tr); err != nil {
				return sum, err
			}
			sum.storeBytes, sawStore = hdr.Size, true
		case hdr.Typeflag == tar.TypeReg && path.Dir(path.Dir(hdr.Name)) == daemon.ArtifactsDir+"/blobs":
			h := sha256.New()
			if _, err := io.Copy(h, tr); err != nil {
				return sum, err
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != path.Base(hdr.Name) {
				return sum, fmt.Errorf("blob %s has content of sha256 %s", hdr.Name, got)
			}
			sum.blobs++
			sum.blobBytes += hdr.Size
		case snapshotEntry.MatchString(hdr.Name) && path.Clean(hdr.Name) == strings.TrimSuffix(hdr.Name, "/") &&
			(hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeDir || hdr.Typeflag == tar.TypeSymlink):
			if sum.snapshots == nil {
				sum.snapshots = map[string]bool{}
			}
			sum.snapshots[snapshotEntry.FindStringSubmatch(hdr.Name)[1]] = true
		case hdr.Typeflag == tar.TypeDir && (hdr.Name == daemon.SnapshotsDir+"/" || !strings.HasPrefix(hdr.Name, daemon.SnapshotsDir+"/")):
		default:
			return sum, fmt.Errorf("unexpected entry %q", hdr.Name)
		}
	}
	if !sawStore {
		return sum, fmt.Errorf("no %s in the archive", daemon.StoreFile)
	}
	return sum, nil
}

// checkStoreCopy opens the store's copy (written to a file in dir) as a store.
func checkStoreCopy(dir string, r io.Reader) error {
	tmp, err := os.CreateTemp(dir, ".state-check-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	st, err := store.Open(tmp.Name(), time.Second)
	if err != nil {
		return fmt.Errorf("the backup's %s does not open as a store: %w", daemon.StoreFile, err)
	}
	return st.Close()
}
