package jobs

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// A job's inputs and outputs on its nodes (DESIGN 6). A downloaded input and an uploaded
// output live in the task's working directory, under inputs/<name> and outputs/<name>;
// the command finds them through MLCOMPUTE_WORK_DIR, which every driver sets, so their
// paths hold on any node. A mounted one (ro_mount, rw_mount) is the engine's own
// directory, named by its absolute path: only a node on the engine's filesystem sees it.

var (
	ioNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)
	bindingRE = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)
	jobNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,254}$`)
	ioTypes   = []string{api.URIFolder, api.URIFile}
)

// sharesFilesystem reports whether a compute's nodes see the engine's filesystem: local
// nodes do; attached machines, attached Kubernetes clusters and the other drivers' nodes
// do not.
func (c *Controller) sharesFilesystem(rec model.Compute) bool {
	return c.cfg.SharedFilesystem && rec.Attached == nil && rec.Kubernetes == nil && rec.KubeJob == nil
}

// prepareIO checks a job's inputs and outputs as submitted, resolves the inputs that are
// other jobs' outputs (each must be registered), and replaces the bindings of the
// command. j holds the spec's inputs and outputs and has its ID; rec is its compute.
func (c *Controller) prepareIO(tx *store.Tx, j *model.Job, rec model.Compute) error {
	shared := c.sharesFilesystem(rec)
	for _, name := range slices.Sorted(maps.Keys(j.Inputs)) {
		in := j.Inputs[name]
		field := "inputs." + name
		if in.Value != nil {
			if err := inputModes.checkName(name); err != nil {
				return err
			}
			if in.Type != "" || in.Path != "" || in.SnapshotID != "" || in.Mode != "" {
				return api.Errorf(api.CodeInvalid, field, "a literal input has a value and nothing else")
			}
			continue
		}
		if err := inputModes.check(name, j.Compute, shared, &in.Type, &in.Mode); err != nil {
			return err
		}
		switch {
		case in.SnapshotID != "":
			if c.cfg.Snapshots == nil {
				return api.Errorf(api.CodeInvalid, field, "this engine keeps no snapshots")
			}
			if _, err := c.cfg.Snapshots.Path(in.SnapshotID); err != nil {
				return api.Errorf(api.CodeInvalid, field+".snapshot_id", "input %q: snapshot %q is not known to this engine; upload it first", name, in.SnapshotID)
			}
		case strings.HasPrefix(in.Path, "azureml:"):
			out, err := model.ResolveJobOutput(tx, j.Workspace, in.Path)
			if err != nil {
				return api.Errorf(api.CodeOf(err), field+".path", "input %q: %v", name, err)
			}
			if out.Type != in.Type {
				return api.Errorf(api.CodeInvalid, field+".type", "input %q is a %s but %s is a %s", name, in.Type, in.Path, out.Type)
			}
			in.Digest, in.Size, in.FileCount = out.Digest, out.Size, out.FileCount
			if in.Type == api.URIFile {
				// A uri_file output's one file is named after the output (ioPath).
				_, in.FileName, _ = api.ParseJobOutputURI(in.Path)
			}
		default:
			return api.Errorf(api.CodeInvalid, field+".path", "input %q needs a snapshot_id (a local path, uploaded) or a path azureml://jobs/<job>/outputs/<output>", name)
		}
		if in.Type == api.URIFile && (in.FileName == "" || strings.ContainsAny(in.FileName, "/\x00") || in.FileName == "." || in.FileName == "..") {
			return api.Errorf(api.CodeInvalid, field+".file_name", "input %q is a uri_file and needs the name of its file", name)
		}
		j.Inputs[name] = in
	}
	for _, name := range slices.Sorted(maps.Keys(j.Outputs)) {
		out := j.Outputs[name]
		field := "outputs." + name
		if err := outputModes.check(name, j.Compute, shared, &out.Type, &out.Mode); err != nil {
			return err
		}
		if out.Digest != "" || out.Size != 0 || out.FileCount != 0 {
			return api.Errorf(api.CodeInvalid, field, "an output's digest, size and file count are the engine's to set")
		}
		j.Outputs[name] = out
	}
	return c.bindCommand(j)
}

// ioKind is what inputs and outputs check alike: their names, types and modes, where
// each has a mode that copies (the default) and one that mounts the engine's directory.
type ioKind struct{ kind, copy, mount string }

var (
	inputModes  = ioKind{"input", api.ModeDownload, api.ModeROMount}
	outputModes = ioKind{"output", api.ModeUpload, api.ModeRWMount}
)

func (k ioKind) checkName(name string) error {
	if !ioNameRE.MatchString(name) {
		return api.Errorf(api.CodeInvalid, k.kind+"s."+name, "%s name %q must start with a letter or '_' and hold only letters, digits and '_'", k.kind, name)
	}
	return nil
}

// check checks an input's or output's name, defaults its type (uri_folder) and mode (the
// copying one) and checks them: the mounting mode needs nodes that share the engine's
// filesystem (shared), which compute's do not when it is false.
func (k ioKind) check(name, compute string, shared bool, typ, mode *string) error {
	if err := k.checkName(name); err != nil {
		return err
	}
	field := k.kind + "s." + name
	if *typ == "" {
		*typ = api.URIFolder
	}
	if !slices.Contains(ioTypes, *typ) {
		return api.Errorf(api.CodeInvalid, field+".type", "%q is not allowed (allowed: %s)", *typ, strings.Join(ioTypes, ", "))
	}
	if *mode == "" {
		*mode = k.copy
	}
	switch *mode {
	case k.copy:
	case k.mount:
		if !shared {
			return api.Errorf(api.CodeInvalid, field+".mode", "%s %q: mode %s needs nodes that share the engine's filesystem (local nodes), and compute %q's do not; use mode %s", k.kind, name, k.mount, compute, k.copy)
		}
	default:
		return api.Errorf(api.CodeInvalid, field+".mode", "%q is not allowed for an %s (allowed: %s, %s)", *mode, k.kind, k.copy, k.mount)
	}
	return nil
}

// bindCommand replaces each ${{inputs.<name>}} and ${{outputs.<name>}} of the command's
// words by its path on the node, or a literal's value.
func (c *Controller) bindCommand(j *model.Job) error {
	var bad error
	for i, word := range j.Command {
		j.Command[i] = bindingRE.ReplaceAllStringFunc(word, func(s string) string {
			kind, name, _ := strings.Cut(bindingRE.FindStringSubmatch(s)[1], ".")
			p, err := c.nodePath(j, kind, name)
			if err != nil && bad == nil {
				bad = err
			}
			return p
		})
	}
	return bad
}

// nodePath is what ${{<kind>.<name>}} stands for on the job's nodes.
func (c *Controller) nodePath(j *model.Job, kind, name string) (string, error) {
	switch kind {
	case "inputs":
		in, ok := j.Inputs[name]
		if !ok {
			return "", api.Errorf(api.CodeInvalid, "command", "${{inputs.%s}} names an input the job does not declare (inputs: %s)", name, model.KeyList(j.Inputs))
		}
		if in.Value != nil {
			return *in.Value, nil
		}
		return c.ioPath(j, model.InputsDir, name, in.Mode == api.ModeROMount, in.Type, in.FileName), nil
	case "outputs":
		out, ok := j.Outputs[name]
		if !ok {
			return "", api.Errorf(api.CodeInvalid, "command", "${{outputs.%s}} names an output the job does not declare (outputs: %s)", name, model.KeyList(j.Outputs))
		}
		return c.ioPath(j, model.OutputsDir, name, out.Mode == api.ModeRWMount, out.Type, name), nil
	}
	return "", api.Errorf(api.CodeInvalid, "command", "${{%s.%s}} is not supported: a command takes ${{inputs.<name>}} and ${{outputs.<name>}}", kind, name)
}

// ioPath is the path of an input's or output's directory (or of its file, for a
// uri_file) on the node: the engine's own directory when mounted, else a directory of the
// task's working directory.
func (c *Controller) ioPath(j *model.Job, dir, name string, mounted bool, typ, file string) string {
	base := "${" + driver.WorkDirEnv + "}/" + dir + "/" + name
	if mounted {
		base = c.core.MountPath(j.Job, dir, name)
	}
	if typ == api.URIFile {
		return base + "/" + file
	}
	return base
}
