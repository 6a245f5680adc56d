package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func newSizesCommand(g *globals) *cobra.Command {
	sizes := &cobra.Command{Use: "sizes", Short: "VM sizes of the catalog"}
	var (
		output string
		gpu    bool
		f      api.SizeFilter
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the VM sizes this engine offers (retired ones with --include-retired)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if gpu && f.MinGPUs < 1 {
				f.MinGPUs = 1
			}
			c, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			list, err := c.ListSizes(cmd.Context(), f)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), api.SizeList{Sizes: list})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tFAMILY\tVCPUS\tMEMORY_GB\tGPUS\tGPU_MODEL\tRETIRED_ON")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%g\t%d\t%s\t%s\n", s.Name, s.Family, s.VCPUs, s.MemoryGB, s.GPUs, dash(s.GPUModel), dash(s.RetiredOn))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&gpu, "gpu", false, "only sizes with GPUs")
	list.Flags().StringVar((*string)(&f.ComputeType), "compute-type", "", "only sizes that support ComputeCluster, ComputeInstance or OnlineDeployment")
	list.Flags().StringVar(&f.Family, "family", "", "only sizes of this family")
	list.Flags().BoolVar(&f.IncludeRetired, "include-retired", false, "include retired sizes")
	addOutputFlag(list, &output)
	sizes.AddCommand(list)
	return sizes
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
