// Package jobfile turns the YAML of a command or pipeline job (package jobspec) into a
// submission of the engine's API, and uploads the code directories and local inputs it
// names as snapshots. `mlcompute job submit -f` and the mlcompute_schedule resource both
// use it, so a job's files are snapshotted alike wherever it is submitted from.
package jobfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/jobspec"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
)

// Uploader stores a snapshot archive and returns its ID (the engine's client does).
type Uploader interface {
	PutSnapshot(ctx context.Context, workspace string, archive []byte) (string, error)
}

// localPaths resolves a path of the YAML: absolute as written, relative from base.
func localPaths(base string) func(string) string {
	return func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
}

// Command turns a command job's YAML into a submission: code is the code directory to
// snapshot ("" for none), and uploads the local inputs to pack and upload (name -> path).
// Relative paths are taken from base; file names the YAML in errors.
func Command(file, base string, c *jobspec.CommandJob) (spec api.JobSpec, code string, uploads map[string]string, err error) {
	local := localPaths(base)
	spec = api.JobSpec{
		Name: c.Name, DisplayName: c.DisplayName, ExperimentName: c.ExperimentName, Description: c.Description, Tags: c.Tags,
		Compute: c.Compute, InstanceType: c.InstanceType, InstanceCount: c.InstanceCount, Environment: c.Environment,
		Env: c.EnvVars, Command: []string{"sh", "-c", c.Command},
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	if c.Code != "" {
		code = local(c.Code)
	}
	if c.Timeout > 0 {
		// Whole seconds, as Azure gives it; a Go duration such as 90ms rounds up.
		spec.TimeoutSeconds = int64((c.Timeout + time.Second - 1) / time.Second)
	}
	if spec.Inputs, uploads, err = Inputs(file, c.Lines, "", c.Inputs, local); err != nil {
		return api.JobSpec{}, "", nil, err
	}
	spec.Outputs = map[string]api.JobOutput{}
	for name, o := range c.Outputs {
		spec.Outputs[name] = api.JobOutput{Type: o.Type, Mode: o.Mode}
	}
	return spec, code, uploads, nil
}

// UploadCode packs a code directory and uploads it, returning the snapshot's ID.
func UploadCode(ctx context.Context, c Uploader, ws, dir string) (string, error) {
	id, err := uploadDir(ctx, c, ws, dir)
	if err != nil {
		return "", fmt.Errorf("uploading code: %w", err)
	}
	return id, nil
}

// Submission is a job's YAML (command or pipeline) made ready to submit: Spec, with the
// code and local inputs it names still to upload.
type Submission struct {
	YAML string
	Spec api.JobSpec
	// code and inputs of a command job; pipeline's of a pipeline.
	code     string
	inputs   map[string]string
	pipeline *PipelineUploads
}

// Parse parses and checks a job's YAML; its relative paths are taken from base, and file
// names it in errors. Local paths are checked to exist, not read.
func Parse(file, base, yaml string) (*Submission, error) {
	parsed, err := jobspec.Parse([]byte(yaml))
	if err != nil {
		return nil, err
	}
	s := &Submission{YAML: yaml}
	if parsed.Pipeline != nil {
		spec, up, err := Pipeline(file, base, parsed.Pipeline)
		if err != nil {
			return nil, err
		}
		s.Spec, s.pipeline = spec, &up
		return s, nil
	}
	if s.Spec, s.code, s.inputs, err = Command(file, base, parsed.Command); err != nil {
		return nil, err
	}
	return s, nil
}

// Upload snapshots the code directories and local inputs through c and fills their IDs
// in Spec. It returns the content hash: SHA-256 over the YAML and the snapshots' IDs (each
// the SHA-256 of its archive), in a fixed order.
func (s *Submission) Upload(ctx context.Context, c Uploader, ws string) (string, error) {
	rec := &recording{Uploader: c}
	if s.pipeline != nil {
		if err := s.pipeline.Upload(ctx, rec, ws, &s.Spec); err != nil {
			return "", err
		}
	} else {
		if s.code != "" {
			var err error
			if s.Spec.SnapshotID, err = UploadCode(ctx, rec, ws, s.code); err != nil {
				return "", fmt.Errorf("code: %w", err)
			}
		}
		if err := UploadInputs(ctx, rec, ws, &s.Spec, s.inputs); err != nil {
			return "", err
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d\n%s\n", len(s.YAML), s.YAML)
	for _, id := range rec.ids {
		fmt.Fprintf(h, "%s\n", id)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ContentHash is the hash Upload would return, with nothing uploaded: the archives are
// packed here and only hashed.
func (s *Submission) ContentHash(ctx context.Context) (string, error) {
	clone := *s
	clone.Spec = cloneSpec(s.Spec)
	return clone.Upload(ctx, hashOnly{}, "")
}

// cloneSpec copies what Upload writes into: the inputs and the pipeline's steps.
func cloneSpec(spec api.JobSpec) api.JobSpec {
	spec.Inputs = maps.Clone(spec.Inputs)
	if p := spec.Pipeline; p != nil {
		pc := *p
		pc.Inputs = maps.Clone(p.Inputs)
		pc.Steps = slices.Clone(p.Steps)
		for i := range pc.Steps {
			pc.Steps[i].Job.Inputs = maps.Clone(pc.Steps[i].Job.Inputs)
		}
		spec.Pipeline = &pc
	}
	return spec
}

// recording passes uploads on and keeps their IDs in order.
type recording struct {
	Uploader
	ids []string
}

func (r *recording) PutSnapshot(ctx context.Context, ws string, archive []byte) (string, error) {
	id, err := r.Uploader.PutSnapshot(ctx, ws, archive)
	if err == nil {
		r.ids = append(r.ids, id)
	}
	return id, err
}

// hashOnly "uploads" an archive by hashing it, as the engine's snapshot store names it.
type hashOnly struct{}

func (hashOnly) PutSnapshot(_ context.Context, _ string, archive []byte) (string, error) {
	sum := sha256.Sum256(archive)
	return hex.EncodeToString(sum[:]), nil
}

// PipelineUploads are what a pipeline's submission uploads first: each step's code
// directory and local inputs, and the pipeline's local inputs.
type PipelineUploads struct {
	code   map[string]string            // step -> code directory
	inputs map[string]map[string]string // step -> input -> local path
	own    map[string]string            // pipeline input -> local path
}

// Pipeline turns a pipeline's YAML into a submission. Relative paths are taken from
// base; file names the YAML in errors.
func Pipeline(file, base string, p *jobspec.PipelineJob) (api.JobSpec, PipelineUploads, error) {
	local := localPaths(base)
	up := PipelineUploads{code: map[string]string{}, inputs: map[string]map[string]string{}}
	ps := &api.PipelineSpec{
		ContinueOnStepFailure: p.Settings.ContinueOnStepFailure, ForceRerun: p.Settings.ForceRerun,
		Outputs: map[string]api.JobOutput{},
	}
	var err error
	if ps.Inputs, up.own, err = Inputs(file, p.Lines, "", p.Inputs, local); err != nil {
		return api.JobSpec{}, up, err
	}
	for name, o := range p.Outputs {
		ps.Outputs[name] = api.JobOutput{Type: o.Type, Mode: o.Mode}
	}
	for _, name := range p.Order {
		st := p.Jobs[name]
		job := api.JobSpec{
			Compute: st.Compute, InstanceType: st.InstanceType, InstanceCount: st.InstanceCount, Environment: st.Environment,
			Env: st.EnvVars, Command: []string{"sh", "-c", st.Command}, DisplayName: st.DisplayName, Description: st.Description, Tags: st.Tags,
			TimeoutSeconds: wholeSeconds(st.Timeout, st.Retry.Timeout),
		}
		step := api.PipelineStepSpec{
			Name: name, InputBindings: map[string]string{}, OutputBindings: map[string]string{},
			IsDeterministic: &st.IsDeterministic, MaxRetries: st.Retry.MaxRetries,
			ComputePath: st.ComputePath, EnvironmentPath: st.EnvironmentPath,
		}
		var uploads map[string]string
		if job.Inputs, uploads, err = Inputs(file, p.Lines, "jobs."+name+".", st.Inputs, local); err != nil {
			return api.JobSpec{}, up, err
		}
		up.inputs[name] = uploads
		for in, v := range st.Inputs {
			if b := v.Binding; b != nil {
				job.Inputs[in] = api.JobInput{Type: v.Type, Mode: v.Mode}
				step.InputBindings[in] = "parent.inputs." + b.ParentInput
				if b.Step != "" {
					step.InputBindings[in] = "parent.jobs." + b.Step + ".outputs." + b.Output
				}
			}
		}
		job.Outputs = map[string]api.JobOutput{}
		for out, v := range st.Outputs {
			job.Outputs[out] = api.JobOutput{Type: v.Type, Mode: v.Mode}
			if v.ParentOutput != "" {
				step.OutputBindings[out] = v.ParentOutput
			}
		}
		if st.Code != "" {
			up.code[name] = local(st.Code)
		}
		step.Job = job
		ps.Steps = append(ps.Steps, step)
	}
	return api.JobSpec{
		Type: api.JobTypePipeline, Pipeline: ps, Name: p.Name, DisplayName: p.DisplayName,
		ExperimentName: p.ExperimentName, Description: p.Description, Tags: p.Tags,
	}, up, nil
}

// wholeSeconds is a step's timeout in whole seconds, rounded up: the shorter of
// limits.timeout and retry_settings.timeout (each attempt's), 0 for none.
func wholeSeconds(limits, retry time.Duration) int64 {
	d := limits
	if retry > 0 && (d == 0 || retry < d) {
		d = retry
	}
	return int64((d + time.Second - 1) / time.Second)
}

// upload packs and uploads the code directories and local inputs, filling the
// snapshot IDs in spec. A directory used by several steps is uploaded once.
func (u PipelineUploads) Upload(ctx context.Context, c Uploader, ws string, spec *api.JobSpec) error {
	ps := spec.Pipeline
	if err := UploadInputs(ctx, c, ws, &api.JobSpec{Inputs: ps.Inputs}, u.own); err != nil {
		return err
	}
	codes := map[string]string{}
	for i := range ps.Steps {
		s := &ps.Steps[i]
		if dir, ok := u.code[s.Name]; ok {
			if codes[dir] == "" {
				var archive bytes.Buffer
				if _, err := snapshot.Pack(dir, &archive, snapshot.DefaultLimits); err != nil {
					return fmt.Errorf("jobs.%s.code: %w", s.Name, err)
				}
				id, err := c.PutSnapshot(ctx, ws, archive.Bytes())
				if err != nil {
					return fmt.Errorf("uploading jobs.%s.code: %w", s.Name, err)
				}
				codes[dir] = id
			}
			s.Job.SnapshotID = codes[dir]
		}
		if err := UploadInputs(ctx, c, ws, &s.Job, u.inputs[s.Name]); err != nil {
			return fmt.Errorf("jobs.%s: %w", s.Name, err)
		}
	}
	return nil
}

// Inputs turns the inputs of a job's YAML into the API's: a literal keeps its value,
// an azureml:// path is passed on, and a local path (relative to the file) is checked and
// listed in uploads (name -> path) for the caller to pack and upload. prefix is the YAML
// path of the job ("" or "jobs.<step>."), for the lines of errors. Inputs bound to a
// pipeline (${{parent...}}) are left to the caller.
func Inputs(file string, lines map[string]int, prefix string, inputs map[string]jobspec.Input, local func(string) string) (map[string]api.JobInput, map[string]string, error) {
	uploads := map[string]string{}
	out := map[string]api.JobInput{}
	for name, in := range inputs {
		path := prefix + "inputs." + name + ".path"
		switch {
		case in.Binding != nil:
		case in.Literal != "":
			v := in.Value
			out[name] = api.JobInput{Value: &v}
		case strings.HasPrefix(in.Path, jobspec.AzureMLPrefix):
			out[name] = api.JobInput{Type: in.Type, Mode: in.Mode, Path: in.Path}
		default:
			p := local(in.Path)
			st, err := os.Stat(p)
			switch {
			case err != nil:
				return nil, nil, fmt.Errorf("%s: line %d: %s: %s does not exist or cannot be read: %v", file, lines[path], path, in.Path, err)
			case in.Type == jobspec.URIFolder && !st.IsDir():
				return nil, nil, fmt.Errorf("%s: line %d: %s: %s is not a directory (a uri_folder input is one; a single file is type: uri_file)", file, lines[path], path, in.Path)
			case in.Type == jobspec.URIFile && !st.Mode().IsRegular():
				return nil, nil, fmt.Errorf("%s: line %d: %s: %s is not a regular file (a uri_file input is one)", file, lines[path], path, in.Path)
			}
			ji := api.JobInput{Type: in.Type, Mode: in.Mode, Path: in.Path}
			if in.Type == jobspec.URIFile {
				ji.FileName = filepath.Base(p)
			}
			out[name] = ji
			uploads[name] = p
		}
	}
	return out, uploads, nil
}

// UploadInputs packs and uploads each local input as a snapshot (a uri_file's one file
// in a directory of its own), honouring .amlignore or .gitignore as for code.
func UploadInputs(ctx context.Context, c Uploader, ws string, spec *api.JobSpec, uploads map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(uploads)) {
		p := uploads[name]
		in := spec.Inputs[name]
		var id string
		var err error
		if in.Type == api.URIFile {
			id, err = UploadFile(ctx, c, ws, p, in.FileName)
		} else {
			id, err = uploadDir(ctx, c, ws, p)
		}
		if err != nil {
			return fmt.Errorf("input %q (%s): %w", name, p, err)
		}
		in.SnapshotID = id
		spec.Inputs[name] = in
	}
	return nil
}

// UploadFile uploads one file as a snapshot that holds it under name, and returns the
// snapshot's ID.
func UploadFile(ctx context.Context, c Uploader, ws, file, name string) (string, error) {
	tmp, err := os.MkdirTemp("", "mlcompute-upload-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := copyFile(file, filepath.Join(tmp, name)); err != nil {
		return "", err
	}
	return uploadDir(ctx, c, ws, tmp)
}

// uploadDir packs a directory as code is packed and uploads it.
func uploadDir(ctx context.Context, c Uploader, ws, dir string) (string, error) {
	var archive bytes.Buffer
	if _, err := snapshot.Pack(dir, &archive, snapshot.DefaultLimits); err != nil {
		return "", err
	}
	return c.PutSnapshot(ctx, ws, archive.Bytes())
}

// copyFile copies a file with its modification time, so the archive of an unchanged
// file (and the content hash of a schedule's job) is the same every time.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chtimes(dst, st.ModTime(), st.ModTime())
}
