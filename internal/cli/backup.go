package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

func newBackupCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the engine's store to FILE while it runs",
		Long: "Write a consistent copy of the engine's store (state.db) to FILE while the engine " +
			"runs, as of one moment. The copy is written next to FILE, checked by opening it as a " +
			"store, and only then renamed to FILE (mode 0600). To restore it, stop the engine " +
			"('mlcompute shutdown') and copy FILE over <data-dir>/state.db.",
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
			n, err := c.Backup(cmd.Context(), tmp)
			if err == nil {
				err = tmp.Sync()
			}
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("writing the backup: %w", err)
			}
			check, err := store.Open(tmp.Name(), time.Second)
			if err != nil {
				return fmt.Errorf("the backup does not open as a store: %w", err)
			}
			check.Close()
			if err := os.Rename(tmp.Name(), dest); err != nil {
				return fmt.Errorf("writing the backup: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote a backup of the engine's store (%d bytes) to %s\n", n, dest)
			return nil
		},
	}
}
