package cli

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/jobspec"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/jobfile"
)

// submitFlags are job submit's flags; beside -f, those given override the file.
type submitFlags struct {
	file, compute, code, instanceType, environment string
	count                                          int64
	env                                            []string
}

// jobFromFile reads a command job's YAML into a submission: its local inputs are packed
// to upload (uploads), relative paths taken from the file's directory, and the flags the
// user gave (and a command after --) override the file.
func jobFromFile(cmd *cobra.Command, f submitFlags, args []string) (api.JobSpec, string, map[string]string, error) {
	raw, err := os.ReadFile(f.file)
	if err != nil {
		return api.JobSpec{}, "", nil, fmt.Errorf("-f: %w", err)
	}
	spec, err := jobspec.Parse(raw)
	if err != nil {
		return api.JobSpec{}, "", nil, fmt.Errorf("%s: %w", f.file, err)
	}
	if spec.Pipeline != nil {
		return api.JobSpec{}, "", nil, fmt.Errorf("%s: a pipeline job (type: pipeline) is submitted with its steps: use jobfile.Pipeline", f.file)
	}
	out, code, uploads, err := jobfile.Command(f.file, filepath.Dir(f.file), spec.Command)
	if err != nil {
		return api.JobSpec{}, "", nil, err
	}
	flags := cmd.Flags()
	if flags.Changed("compute") {
		out.Compute = f.compute
	}
	if flags.Changed("instance-type") {
		out.InstanceType = f.instanceType
	}
	if flags.Changed("instance-count") {
		out.InstanceCount = f.count
	}
	if flags.Changed("environment") {
		out.Environment = f.environment
	}
	if flags.Changed("code") {
		code = f.code
	}
	if len(args) > 0 {
		out.Command = []string{"sh", "-c", shellJoin(args)}
	}
	return out, code, uploads, nil
}

// shellJoin quotes words for sh -c, so a command after -- runs as given. A word holding
// a ${{...}} binding is double-quoted: the path the engine puts there holds
// ${MLCOMPUTE_WORK_DIR}, which the shell expands.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		switch {
		case a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "":
			quoted[i] = a
		case strings.Contains(a, "${{"):
			quoted[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`").Replace(a) + `"`
		default:
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}

func newJobDownloadCommand(g *globals) *cobra.Command {
	var ws, outputName, dir string
	var all bool
	cmd := &cobra.Command{
		Use:   "download JOB [--output-name O | --all] [--download-path DIR]",
		Short: "Download a Completed job's outputs into DIR/named-outputs/<output>",
		Long: "Download a Completed job's registered outputs, as Azure ML's az ml job download does: each " +
			"output goes to DIR/named-outputs/<output> (a uri_file output's one file in it). Every file's " +
			"sha256 and the output's manifest digest are checked against the engine's. Without " +
			"--output-name every output is downloaded (as with --all).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && outputName != "" {
				return fmt.Errorf("--output-name and --all exclude each other: give one")
			}
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			j, err := c.GetJob(cmd.Context(), ws, args[0])
			if err != nil {
				return err
			}
			names := slices.Sorted(maps.Keys(j.Outputs))
			if outputName != "" {
				if _, ok := j.Outputs[outputName]; !ok {
					return fmt.Errorf("job %s has no output %q (its outputs: %s)", j.ID, outputName, strings.Join(names, ", "))
				}
				names = []string{outputName}
			}
			if len(names) == 0 {
				return fmt.Errorf("job %s declares no outputs", j.ID)
			}
			for _, name := range names {
				dst := filepath.Join(dir, "named-outputs", name)
				n, err := downloadOutput(cmd.Context(), c, ws, j.ID, name, j.Outputs[name].Type, dst)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d files, %d bytes, %s -> %s\n", name, n.FileCount, n.Size, n.Digest, dst)
			}
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	cmd.Flags().StringVar(&outputName, "output-name", "", "download only this output")
	cmd.Flags().BoolVar(&all, "all", false, "download every output (the default)")
	cmd.Flags().StringVar(&dir, "download-path", ".", "directory to download into (outputs go to DIR/named-outputs/<output>)")
	return cmd
}

// downloadOutput writes an output into dst and checks it against its digest.
func downloadOutput(ctx context.Context, c *client.Client, ws, job, name, typ, dst string) (*api.JobOutput, error) {
	info, body, err := c.DownloadJobOutput(ctx, ws, job, name)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	m, err := extractOutput(body, dst, typ)
	if err != nil {
		return nil, fmt.Errorf("downloading output %q of job %s: %w", name, job, err)
	}
	got, err := m.Digest()
	if err != nil {
		return nil, fmt.Errorf("downloading output %q of job %s: %w", name, job, err)
	}
	if got != info.Digest {
		return nil, fmt.Errorf("downloading output %q of job %s: the files received have digest %s, the engine's is %s", name, job, got, info.Digest)
	}
	info.Type = typ
	return info, nil
}

// extractOutput writes a tar stream of regular files and directories into dst (no name
// leaves it: os.Root), hashing each file, and returns their manifest.
func extractOutput(r io.Reader, dst, typ string) (artifacts.Manifest, error) {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return artifacts.Manifest{}, err
	}
	defer root.Close()
	m := artifacts.Manifest{Type: typ}
	tr := tar.NewReader(r)
	buf := make([]byte, 1<<20)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, err
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if name != "." {
				if err := root.MkdirAll(name, 0o755); err != nil {
					return m, err
				}
			}
			continue
		case tar.TypeReg:
		default:
			return m, fmt.Errorf("entry %q is not a file or directory", hdr.Name)
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return m, err
			}
		}
		perm := os.FileMode(0o644)
		if hdr.Mode&0o111 != 0 {
			perm = 0o755
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
		if err != nil {
			return m, err
		}
		h := sha256.New()
		n, err := io.CopyBuffer(io.MultiWriter(f, h), tr, buf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return m, fmt.Errorf("file %q: %w", name, err)
		}
		m.Files = append(m.Files, artifacts.File{Path: name, Size: n, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Executable: hdr.Mode&0o111 != 0})
	}
	slices.SortFunc(m.Files, func(a, b artifacts.File) int { return strings.Compare(a.Path, b.Path) })
	return m, nil
}

func newJobDeleteCommand(g *globals) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "delete JOB",
		Short: "Delete a finished job: its record, logs and references to outputs",
		Long: "Delete a finished job (Completed, Failed or Canceled): its record, its logs and its " +
			"references to outputs go, and the engine removes the stored files no other job references. " +
			"A job that has not finished is refused; cancel it first.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.workspaceClient(cmd.Context(), ws, "")
			if err != nil {
				return err
			}
			if err := c.DeleteJob(cmd.Context(), ws, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s deleted\n", args[0])
			return nil
		},
	}
	addWorkspaceFlag(cmd, &ws)
	return cmd
}
