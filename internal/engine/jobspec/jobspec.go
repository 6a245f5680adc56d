// Package jobspec reads the subset of Azure Machine Learning's v2 job YAML that
// `mlcompute job submit -f` takes (DESIGN section 6). It decides only the file's shape:
// which keys exist, their types and allowed values, and that every `${{inputs.X}}` and
// `${{outputs.Y}}` of the command names a declared input or output. Whether a compute,
// an environment or another job's output exists is the engine's to say at submit.
//
// A document is parsed by its `type`: a command job, or a pipeline job (`type: pipeline`)
// whose steps are command jobs read by the same parser under the path prefix
// `jobs.<step>.`. A pipeline's bindings are checked with rules/pipeline.Validate.
package jobspec

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Job types.
const (
	TypeCommand  = "command"
	TypePipeline = "pipeline"
)

// Input and output types and modes (Azure's names).
const (
	URIFolder = api.URIFolder
	URIFile   = api.URIFile

	ModeDownload = api.ModeDownload
	ModeROMount  = api.ModeROMount
	ModeUpload   = api.ModeUpload
	ModeRWMount  = api.ModeRWMount
)

// Literal input kinds: how a literal input was written.
const (
	LiteralString  = "string"
	LiteralNumber  = "number"
	LiteralBoolean = "boolean"
)

// AzureMLPrefix starts a reference to a registered asset (`azureml:cpu`,
// `azureml://jobs/<job>/outputs/<output>`).
const AzureMLPrefix = "azureml:"

// Spec is one parsed document. Exactly one of its job fields is set, by Type.
type Spec struct {
	Type     string
	Command  *CommandJob
	Pipeline *PipelineJob
}

// CommandJob is a command job: one command on instance_count nodes.
// Names are the keys that name and describe a job, a command job's and a pipeline's alike.
type Names struct {
	Name           string
	DisplayName    string
	ExperimentName string
	Description    string
	Tags           map[string]string
}

// parse reads key, one of Names' keys, whose value v is at the YAML path path.
func (n *Names) parse(key string, v *yaml.Node, path string) (err error) {
	switch key {
	case "name":
		if n.Name, err = scalar(v, path); err == nil && !nameRE.MatchString(n.Name) {
			err = errAt(v, path, "job name %q must start with a letter or digit and hold only letters, digits, '_' and '-' (at most 255 characters)", n.Name)
		}
	case "display_name":
		n.DisplayName, err = scalar(v, path)
	case "experiment_name":
		n.ExperimentName, err = scalar(v, path)
	case "description":
		n.Description, err = scalar(v, path)
	case "tags":
		n.Tags, err = stringMap(v, path)
	}
	return err
}

type CommandJob struct {
	Names
	// Code is the code directory as written (relative to the YAML file when not absolute).
	Code    string
	Command string
	// Environment and Compute are names, their `azureml:` prefix (and an environment's
	// `@latest`) removed.
	Environment   string
	Compute       string
	InstanceCount int64
	InstanceType  string
	EnvVars       map[string]string
	Inputs        map[string]Input
	Outputs       map[string]Output
	// Timeout is limits.timeout; zero when not given.
	Timeout time.Duration
	// Lines holds the line of each key given, by its YAML path ("compute",
	// "inputs.data.path"): errors found later (the engine's) name it.
	Lines map[string]int
}

// Input is one of a command job's inputs: a path (Type is URIFolder or URIFile) or a
// literal (Literal is set, Value holds it as written).
type Input struct {
	Type string
	// Path is a local path as written, or an `azureml://jobs/<job>/outputs/<output>` URI.
	Path string
	Mode string
	// Binding is set for a pipeline step's input bound to the pipeline
	// (`${{parent.inputs.x}}`, `${{parent.jobs.<step>.outputs.<o>}}`); Path is empty then.
	Binding *Binding
	// Literal is the literal's kind (LiteralString, LiteralNumber, LiteralBoolean); empty
	// for a path input.
	Literal string
	Value   string
}

// Output is one of a command job's outputs.
type Output struct {
	Type string
	Mode string
	// ParentOutput is the pipeline output a step's output is registered as
	// (`${{parent.outputs.y}}`); empty otherwise.
	ParentOutput string
}

// Error is a problem with the file at one place: its line (0 when it is the whole
// document's) and the YAML path of the key.
type Error struct {
	Line int
	Path string
	Msg  string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Path != "":
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Path, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	case e.Path != "":
		return fmt.Sprintf("%s: %s", e.Path, e.Msg)
	}
	return e.Msg
}

func errAt(n *yaml.Node, path, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Parse reads one job document.
func Parse(data []byte) (*Spec, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{Msg: fmt.Sprintf("not valid YAML: %v", err)}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &Error{Msg: "the file is empty: a job needs at least type, command and compute"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errAt(root, "", "a job is a mapping of keys (type, command, compute, ...)")
	}
	typ, typNode := TypeCommand, root
	for i := 0; i < len(root.Content); i += 2 {
		if root.Content[i].Value == "type" {
			typNode = root.Content[i+1]
			typ = typNode.Value
		}
	}
	switch typ {
	case TypeCommand:
		c, err := parseCommand(root, "", nil)
		if err != nil {
			return nil, err
		}
		return &Spec{Type: TypeCommand, Command: c}, nil
	case TypePipeline:
		p, err := parsePipeline(root)
		if err != nil {
			return nil, err
		}
		return &Spec{Type: TypePipeline, Pipeline: p}, nil
	}
	return nil, errAt(typNode, "type", "unknown job type %q (allowed: %s, %s)", typ, TypeCommand, TypePipeline)
}

// commandKeys are a command job's keys, in the order the docs list them.
var commandKeys = []string{
	"$schema", "type", "name", "display_name", "experiment_name", "description", "tags", "code", "command",
	"environment", "compute", "resources", "environment_variables", "inputs", "outputs", "limits",
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,254}$`)

// ioNameRE is an input's or output's name: it becomes a directory on the node and a
// word of `${{inputs.<name>}}`.
var ioNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)

// parseCommand reads a command job from its mapping; prefix is the YAML path of the
// mapping ("" for a document, "jobs.train." for a pipeline step). For a step, step is
// where its step-only keys go, and its inputs and outputs may be bound to the pipeline.
func parseCommand(m *yaml.Node, prefix string, step *Step) (*CommandJob, error) {
	c := &CommandJob{InstanceCount: 1, Lines: map[string]int{}}
	var commandNode *yaml.Node
	keys := commandKeys
	if step != nil {
		keys = append(slices.Clone(commandKeys), stepKeys...)
	}
	err := eachKey(m, prefix, keys, func(key string, k, v *yaml.Node) error {
		path := prefix + key
		c.Lines[path] = k.Line
		var err error
		switch key {
		case "$schema":
			// $schema names Azure's schema, for editors.
			_, err = scalar(v, path)
		case "type":
			// type chose this parser; a step is a command job.
			var s string
			if s, err = scalar(v, path); err == nil && step != nil && s != TypeCommand {
				err = errAt(v, path, "a step is a command job (type: command); %q steps are not supported", s)
			}
		case "name", "display_name", "experiment_name", "description", "tags":
			err = c.parse(key, v, path)
		case "code":
			c.Code, err = nonEmpty(v, path)
		case "command":
			c.Command, err = nonEmpty(v, path)
			commandNode = v
		case "environment":
			if v.Kind == yaml.MappingNode {
				return errAt(v, path, "an inline environment is not supported; name an environment of the workspace (azureml:<name>)")
			}
			var s string
			if s, err = nonEmpty(v, path); err == nil {
				c.Environment, err = environmentName(v, path, s)
			}
		case "compute":
			var s string
			if s, err = nonEmpty(v, path); err == nil {
				c.Compute = strings.TrimPrefix(s, AzureMLPrefix)
				if c.Compute == "" {
					err = errAt(v, path, "%q names no compute", s)
				}
			}
		case "resources":
			err = parseResources(v, path, c)
		case "environment_variables":
			c.EnvVars, err = stringMap(v, path)
		case "inputs":
			c.Inputs, err = parseInputs(v, path, c.Lines, step != nil)
		case "outputs":
			c.Outputs, err = parseOutputs(v, path, c.Lines, step != nil)
		case "limits":
			err = eachKey(v, path+".", []string{"timeout"}, func(_ string, k, v *yaml.Node) error {
				c.Lines[path+".timeout"] = k.Line
				var err error
				c.Timeout, err = seconds(v, path+".timeout")
				return err
			})
		default:
			err = parseStepKey(step, key, v, path, c.Lines)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if commandNode == nil {
		return nil, errAt(m, strings.TrimSuffix(prefix, "."), "the job has no command: add `command: <what each node runs>`")
	}
	if err := checkBindings(commandNode, prefix+"command", c); err != nil {
		return nil, err
	}
	return c, nil
}

func parseResources(v *yaml.Node, path string, c *CommandJob) error {
	return eachKey(v, path+".", []string{"instance_count", "instance_type"}, func(key string, k, v *yaml.Node) error {
		p := path + "." + key
		c.Lines[p] = k.Line
		switch key {
		case "instance_count":
			s, err := scalar(v, p)
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 1 || v.Tag != "!!int" {
				return errAt(v, p, "%q is not a whole number of nodes of at least 1", s)
			}
			c.InstanceCount = n
		case "instance_type":
			var err error
			c.InstanceType, err = nonEmpty(v, p)
			return err
		}
		return nil
	})
}

var inputTypes = []string{URIFolder, URIFile}

// parseInputs reads inputs; inStep allows bindings to the pipeline.
func parseInputs(v *yaml.Node, path string, lines map[string]int, inStep bool) (map[string]Input, error) {
	out := map[string]Input{}
	err := eachKey(v, path+".", nil, func(name string, k, v *yaml.Node) error {
		p := path + "." + name
		lines[p] = k.Line
		if !ioNameRE.MatchString(name) {
			return errAt(k, p, "input name %q must start with a letter or '_' and hold only letters, digits and '_'", name)
		}
		if v.Kind == yaml.ScalarNode {
			if isBinding(v.Value) {
				b, err := inputBinding(v, p, inStep)
				out[name] = Input{Mode: ModeDownload, Binding: b}
				return err
			}
			in, err := literal(v, p)
			out[name] = in
			return err
		}
		in := Input{Mode: ModeDownload}
		var pathNode *yaml.Node
		err := eachKey(v, p+".", []string{"type", "path", "mode"}, func(key string, k, v *yaml.Node) error {
			lines[p+"."+key] = k.Line
			s, err := nonEmpty(v, p+"."+key)
			if err != nil {
				return err
			}
			switch key {
			case "type":
				in.Type, err = oneOf(v, p+".type", s, inputTypes)
			case "path":
				in.Path, pathNode = s, v
			case "mode":
				in.Mode, err = oneOf(v, p+".mode", s, []string{ModeDownload, ModeROMount})
			}
			return err
		})
		if err != nil {
			return err
		}
		if isBinding(in.Path) {
			b, err := inputBinding(pathNode, p+".path", inStep)
			// Type stays as declared ("" when not): parsePipeline gives an undeclared
			// one the type of what it is bound to.
			in.Path, in.Binding = "", b
			out[name] = in
			return err
		}
		if in.Type == "" {
			in.Type = URIFolder
		}
		if in.Path == "" {
			return errAt(v, p, "a %s input needs a path: a local path or azureml://jobs/<job>/outputs/<output>", in.Type)
		}
		if strings.HasPrefix(in.Path, AzureMLPrefix) {
			if _, _, ok := api.ParseJobOutputURI(in.Path); !ok {
				return errAt(v, p+".path", "%q is not a job's output: the form is azureml://jobs/<job>/outputs/<output>", in.Path)
			}
		} else if strings.Contains(in.Path, "://") {
			return errAt(v, p+".path", "%q is not supported: give a local path or azureml://jobs/<job>/outputs/<output>", in.Path)
		}
		out[name] = in
		return nil
	})
	return out, err
}

// literal reads a literal input: a string, a number or a boolean.
func literal(v *yaml.Node, path string) (Input, error) {
	switch v.Tag {
	case "!!str":
		return Input{Literal: LiteralString, Value: v.Value}, nil
	case "!!int", "!!float":
		return Input{Literal: LiteralNumber, Value: v.Value}, nil
	case "!!bool":
		b, _ := strconv.ParseBool(strings.ToLower(v.Value))
		return Input{Literal: LiteralBoolean, Value: strconv.FormatBool(b)}, nil
	}
	return Input{}, errAt(v, path, "an input is a string, a number, a boolean, or a mapping with type and path; got %s", kindName(v))
}

// parseOutputs reads outputs; inStep allows `${{parent.outputs.y}}` as an output's value.
func parseOutputs(v *yaml.Node, path string, lines map[string]int, inStep bool) (map[string]Output, error) {
	out := map[string]Output{}
	err := eachKey(v, path+".", nil, func(name string, k, v *yaml.Node) error {
		p := path + "." + name
		lines[p] = k.Line
		if !ioNameRE.MatchString(name) {
			return errAt(k, p, "output name %q must start with a letter or '_' and hold only letters, digits and '_'", name)
		}
		o := Output{Type: URIFolder, Mode: ModeUpload}
		if v.Tag == "!!null" {
			out[name] = o
			return nil
		}
		if v.Kind == yaml.ScalarNode && isBinding(v.Value) {
			var err error
			o.ParentOutput, err = outputBinding(v, p, inStep)
			out[name] = o
			return err
		}
		err := eachKey(v, p+".", []string{"type", "mode"}, func(key string, k, v *yaml.Node) error {
			lines[p+"."+key] = k.Line
			s, err := nonEmpty(v, p+"."+key)
			if err != nil {
				return err
			}
			if key == "type" {
				o.Type, err = oneOf(v, p+".type", s, inputTypes)
			} else {
				o.Mode, err = oneOf(v, p+".mode", s, []string{ModeUpload, ModeRWMount})
			}
			return err
		})
		out[name] = o
		return err
	})
	return out, err
}

// bindingRE finds `${{...}}` in a command.
var bindingRE = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)

// checkBindings refuses a `${{...}}` of the command that names no declared input or
// output.
func checkBindings(v *yaml.Node, path string, c *CommandJob) error {
	for _, m := range bindingRE.FindAllStringSubmatch(v.Value, -1) {
		kind, name, _ := strings.Cut(m[1], ".")
		switch kind {
		case "inputs":
			if _, ok := c.Inputs[name]; !ok {
				return errAt(v, path, "%s names input %q, which the job does not declare (inputs: %s)", m[0], name, names(c.Inputs))
			}
		case "outputs":
			if _, ok := c.Outputs[name]; !ok {
				return errAt(v, path, "%s names output %q, which the job does not declare (outputs: %s)", m[0], name, names(c.Outputs))
			}
		default:
			return errAt(v, path, "%s is not supported: a command job's command takes ${{inputs.<name>}} and ${{outputs.<name>}}", m[0])
		}
	}
	return nil
}

// Substitute replaces each `${{inputs.<name>}}` and `${{outputs.<name>}}` of command by
// what value returns for it.
func Substitute(command string, value func(kind, name string) string) string {
	return bindingRE.ReplaceAllStringFunc(command, func(s string) string {
		kind, name, _ := strings.Cut(bindingRE.FindStringSubmatch(s)[1], ".")
		return value(kind, name)
	})
}

func names[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// eachKey calls f for each key of mapping m in order, refusing a key not in allowed
// (nil allows any) and a key given twice.
func eachKey(m *yaml.Node, prefix string, allowed []string, f func(key string, k, v *yaml.Node) error) error {
	path := strings.TrimSuffix(prefix, ".")
	if m.Kind != yaml.MappingNode {
		if m.Tag == "!!null" && allowed == nil {
			return nil
		}
		return errAt(m, path, "expected a mapping of keys, got %s", kindName(m))
	}
	seen := map[string]bool{}
	for i := 0; i < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return errAt(k, path, "keys are plain words, got %s", kindName(k))
		}
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			return errAt(k, prefix+k.Value, "unknown key %q (allowed here: %s)", k.Value, strings.Join(allowed, ", "))
		}
		if seen[k.Value] {
			return errAt(k, prefix+k.Value, "key %q is given twice", k.Value)
		}
		seen[k.Value] = true
		if err := f(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

func scalar(v *yaml.Node, path string) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return "", errAt(v, path, "expected a single value, got %s", kindName(v))
	}
	return v.Value, nil
}

func nonEmpty(v *yaml.Node, path string) (string, error) {
	s, err := scalar(v, path)
	if err == nil && strings.TrimSpace(s) == "" {
		err = errAt(v, path, "is empty")
	}
	return s, err
}

func oneOf(v *yaml.Node, path, s string, allowed []string) (string, error) {
	if !slices.Contains(allowed, s) {
		return "", errAt(v, path, "%q is not allowed (allowed: %s)", s, strings.Join(allowed, ", "))
	}
	return s, nil
}

func stringMap(v *yaml.Node, path string) (map[string]string, error) {
	out := map[string]string{}
	err := eachKey(v, path+".", nil, func(key string, _, v *yaml.Node) error {
		s, err := scalar(v, path+"."+key)
		out[key] = s
		return err
	})
	return out, err
}

// environmentName takes `azureml:<name>`, `azureml:<name>@latest` or `<name>`. A
// pinned version (`:<version>`) is refused: the workspace holds one version of each.
func environmentName(v *yaml.Node, path, s string) (string, error) {
	name := strings.TrimSuffix(strings.TrimPrefix(s, AzureMLPrefix), "@latest")
	if strings.ContainsAny(name, ":@/") || name == "" {
		return "", errAt(v, path, "%q is not an environment name: give azureml:<name> (the workspace's current version; a pinned :<version> is not supported)", s)
	}
	return name, nil
}

// seconds reads limits.timeout: Azure's whole number of seconds, or a Go duration
// ("2h").
func seconds(v *yaml.Node, path string) (time.Duration, error) {
	s, err := scalar(v, path)
	if err != nil {
		return 0, err
	}
	var d time.Duration
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && v.Tag == "!!int" {
		d = time.Duration(n) * time.Second
		if n > int64((1<<63-1)/time.Second) {
			d = -1
		}
	} else if d, err = time.ParseDuration(s); err != nil {
		d = -1
	}
	if d <= 0 {
		return 0, errAt(v, path, "%q is not a timeout: give a whole number of seconds above 0 (as Azure does) or a duration such as 2h", s)
	}
	return d, nil
}

func kindName(n *yaml.Node) string {
	switch {
	case n.Tag == "!!null":
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

// IsError reports whether err is a problem with the file.
func IsError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
