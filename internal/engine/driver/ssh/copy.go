package ssh

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tarball"
)

// PutDir copies the contents of the local directory src into dst on the machine (a path
// relative to the home directory), replacing what dst held. It streams a tar archive over
// the connection, so the machine needs tar. Regular files, directories and symbolic links
// are copied with their permission bits; anything else is skipped.
func (c *Client) PutDir(ctx context.Context, src, dst string) error { return PutDir(ctx, c, src, dst) }

// PutDir copies the contents of the local directory src into dst through sh, as
// Client.PutDir does (dst relative to the shell's working directory, or absolute).
func PutDir(ctx context.Context, sh Shell, src, dst string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.Write(ctx, pw, src, tarball.Options{SkipSpecial: true})) }()
	defer pr.Close()
	cmd := fmt.Sprintf(`rm -rf %[1]s && mkdir -p %[1]s && tar -x -m -f - -C %[1]s`, shellQuote(dst))
	stderr, code, err := sh.RunShell(ctx, cmd, pr, io.Discard)
	if err != nil {
		return fmt.Errorf("copying %s to the machine: %w", src, err)
	}
	if code != 0 {
		return fmt.Errorf("copying %s to the machine: remote tar exited %d: %s", src, code, strings.TrimSpace(string(stderr)))
	}
	return nil
}

// HasTaskFiles reports whether StartTask must copy files before the start: a code
// directory or inputs. Such a task runs in a working directory of its own made by the
// copy (RemoteTask.WorkDir), since the task's directory proper appears only with its start.
func HasTaskFiles(spec driver.TaskSpec) bool { return spec.CodeDir != "" || len(spec.Inputs) > 0 }

// PutTaskFiles copies spec's code directory into workDir and then each input into its
// Dest below workDir, through sh, as PutDir does.
func PutTaskFiles(ctx context.Context, sh Shell, spec driver.TaskSpec, workDir string) error {
	if err := driver.CheckTaskPaths(spec); err != nil {
		return driver.Permanent(err)
	}
	if spec.CodeDir != "" {
		if err := PutDir(ctx, sh, spec.CodeDir, workDir); err != nil {
			return err
		}
	}
	for _, in := range spec.Inputs {
		if err := PutDir(ctx, sh, in.Src, workDir+"/"+in.Dest); err != nil {
			return fmt.Errorf("input %s: %w", in.Dest, err)
		}
	}
	return nil
}

// OutputDirs returns the directories to create for outputs (RemoteTask.MakeDirs): each
// output's, or a file output's parent.
func OutputDirs(outputs []driver.TaskOutput) []string {
	var dirs []string
	for _, out := range outputs {
		dir := out.Path
		if out.File {
			dir = path.Dir(dir)
		}
		if dir != "." {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}
