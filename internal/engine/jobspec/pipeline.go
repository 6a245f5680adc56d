package jobspec

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/pipeline"
)

// PipelineJob is a pipeline job: steps (command jobs) bound to each other's outputs and
// to the pipeline's inputs and outputs.
type PipelineJob struct {
	Names
	Inputs   map[string]Input
	Outputs  map[string]Output
	Settings Settings
	// Jobs holds the steps by name; Order, their names as written.
	Jobs  map[string]*Step
	Order []string
	// Lines holds the line of each key given, by its YAML path, the steps' included
	// ("jobs.train.compute").
	Lines map[string]int
}

// Settings is a pipeline's `settings`.
type Settings struct {
	DefaultCompute     string
	DefaultEnvironment string
	// ContinueOnStepFailure lets independent branches finish after a step failed
	// (default false: no other step starts and running ones are canceled).
	ContinueOnStepFailure bool
	// ForceRerun runs every step even when an earlier run could be reused.
	ForceRerun bool
}

// Step is one step of a pipeline: a command job with the step-only keys. Its Compute and
// Environment are filled from the pipeline's settings when the step names none.
type Step struct {
	*CommandJob
	// IsDeterministic (default true) lets the step's results be reused by a later run.
	IsDeterministic bool
	Retry           RetrySettings
	// ComputePath and EnvironmentPath are the YAML paths Compute and Environment come
	// from ("jobs.train.compute" or "settings.default_compute"; "" when not set), for the
	// engine's errors.
	ComputePath     string
	EnvironmentPath string
}

// RetrySettings is a step's `retry_settings`: how many times it is run again after a
// failure of its own, and each attempt's timeout (zero when not given).
type RetrySettings struct {
	MaxRetries int64
	Timeout    time.Duration
}

// Binding is where a step's input comes from: a pipeline input (ParentInput) or an
// upstream step's output (Step and Output).
type Binding struct {
	ParentInput string
	Step        string
	Output      string
}

func (b Binding) String() string {
	if b.ParentInput != "" {
		return "${{parent.inputs." + b.ParentInput + "}}"
	}
	return "${{parent.jobs." + b.Step + ".outputs." + b.Output + "}}"
}

var pipelineKeys = []string{
	"$schema", "type", "name", "display_name", "experiment_name", "description", "tags",
	"inputs", "outputs", "settings", "jobs",
}

var settingsKeys = []string{"default_compute", "default_environment", "continue_on_step_failure", "force_rerun"}

// stepKeys are the keys a step takes beside a command job's.
var stepKeys = []string{"is_deterministic", "retry_settings"}

// parentRE is a whole binding to the pipeline.
var parentRE = regexp.MustCompile(`^\$\{\{\s*parent\.(?:inputs\.([A-Za-z_][A-Za-z0-9_]*)|jobs\.([A-Za-z_][A-Za-z0-9_]*)\.outputs\.([A-Za-z_][A-Za-z0-9_]*)|outputs\.([A-Za-z_][A-Za-z0-9_]*))\s*\}\}$`)

func isBinding(s string) bool { return strings.Contains(s, "${{") }

const bindingForms = "${{parent.inputs.<name>}} or ${{parent.jobs.<step>.outputs.<name>}}"

// inputBinding reads an input's value or path that holds `${{...}}`.
func inputBinding(v *yaml.Node, path string, inStep bool) (*Binding, error) {
	if !inStep {
		return nil, errAt(v, path, "%q: bindings are taken only in a pipeline's steps (type: pipeline)", v.Value)
	}
	m := parentRE.FindStringSubmatch(v.Value)
	switch {
	case m == nil:
		return nil, errAt(v, path, "%q is not a binding: a step's input takes %s, alone", v.Value, bindingForms)
	case m[1] != "":
		return &Binding{ParentInput: m[1]}, nil
	case m[2] != "":
		return &Binding{Step: m[2], Output: m[3]}, nil
	}
	return nil, errAt(v, path, "%q is an output binding: a step's input takes %s", v.Value, bindingForms)
}

// outputBinding reads a step output's value `${{parent.outputs.y}}`.
func outputBinding(v *yaml.Node, path string, inStep bool) (string, error) {
	if !inStep {
		return "", errAt(v, path, "%q: bindings are taken only in a pipeline's steps (type: pipeline)", v.Value)
	}
	m := parentRE.FindStringSubmatch(v.Value)
	if m == nil || m[4] == "" {
		return "", errAt(v, path, "%q: a step's output takes ${{parent.outputs.<name>}}, or a mapping with type and mode", v.Value)
	}
	return m[4], nil
}

// parseStepKey reads a step-only key into step.
func parseStepKey(step *Step, key string, v *yaml.Node, path string, lines map[string]int) error {
	switch key {
	case "is_deterministic":
		var err error
		step.IsDeterministic, err = boolean(v, path)
		return err
	case "retry_settings":
		return eachKey(v, path+".", []string{"max_retries", "timeout"}, func(key string, k, v *yaml.Node) error {
			p := path + "." + key
			lines[p] = k.Line
			if key == "timeout" {
				var err error
				step.Retry.Timeout, err = seconds(v, p)
				return err
			}
			s, err := scalar(v, p)
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 || v.Tag != "!!int" {
				return errAt(v, p, "%q is not a whole number of retries of at least 0", s)
			}
			step.Retry.MaxRetries = n
			return nil
		})
	}
	return nil
}

func boolean(v *yaml.Node, path string) (bool, error) {
	s, err := scalar(v, path)
	if err != nil {
		return false, err
	}
	if v.Tag != "!!bool" {
		return false, errAt(v, path, "%q is not allowed (allowed: true, false)", s)
	}
	b, _ := strconv.ParseBool(strings.ToLower(s))
	return b, nil
}

// parsePipeline reads a pipeline job from the document's mapping and checks its bindings.
func parsePipeline(root *yaml.Node) (*PipelineJob, error) {
	p := &PipelineJob{Jobs: map[string]*Step{}, Lines: map[string]int{}}
	var jobsNode *yaml.Node
	err := eachKey(root, "", pipelineKeys, func(key string, k, v *yaml.Node) error {
		p.Lines[key] = k.Line
		var err error
		switch key {
		case "$schema", "type":
			_, err = scalar(v, key)
		case "name", "display_name", "experiment_name", "description", "tags":
			err = p.parse(key, v, key)
		case "inputs":
			p.Inputs, err = parseInputs(v, key, p.Lines, false)
		case "outputs":
			p.Outputs, err = parseOutputs(v, key, p.Lines, false)
		case "settings":
			err = parseSettings(v, p)
		case "jobs":
			jobsNode = v
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	// Steps are read after settings, wherever either is written, so that a step's
	// defaults are known.
	if jobsNode == nil || len(jobsNode.Content) == 0 {
		return nil, errAt(root, "jobs", "a pipeline needs at least one step: add `jobs: {<step>: {command: ..., compute: ...}}`")
	}
	err = eachKey(jobsNode, "jobs.", nil, func(name string, k, v *yaml.Node) error {
		path := "jobs." + name
		p.Lines[path] = k.Line
		if !ioNameRE.MatchString(name) {
			return errAt(k, path, "step name %q must start with a letter or '_' and hold only letters, digits and '_'", name)
		}
		step := &Step{IsDeterministic: true}
		c, err := parseCommand(v, path+".", step)
		if err != nil {
			return err
		}
		step.CommandJob = c
		for key, line := range c.Lines {
			p.Lines[key] = line
		}
		step.ComputePath, step.Compute = defaulted(c.Compute, path+".compute", p.Settings.DefaultCompute, "settings.default_compute")
		step.EnvironmentPath, step.Environment = defaulted(c.Environment, path+".environment", p.Settings.DefaultEnvironment, "settings.default_environment")
		if step.Compute == "" {
			return errAt(k, path, "the step has no compute: set jobs.%s.compute or settings.default_compute", name)
		}
		p.Jobs[name], p.Order = step, append(p.Order, name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	p.fillBoundTypes()
	if err := p.check(); err != nil {
		return nil, err
	}
	return p, nil
}

// defaulted returns a step's value and the YAML path it comes from: its own, else the
// pipeline's default.
func defaulted(own, ownPath, def, defPath string) (string, string) {
	switch {
	case own != "":
		return ownPath, own
	case def != "":
		return defPath, def
	}
	return "", ""
}

func parseSettings(v *yaml.Node, p *PipelineJob) error {
	return eachKey(v, "settings.", settingsKeys, func(key string, k, v *yaml.Node) error {
		path := "settings." + key
		p.Lines[path] = k.Line
		s := &p.Settings
		var err error
		switch key {
		case "default_compute":
			var name string
			if name, err = nonEmpty(v, path); err == nil {
				s.DefaultCompute = strings.TrimPrefix(name, AzureMLPrefix)
				if s.DefaultCompute == "" {
					err = errAt(v, path, "%q names no compute", name)
				}
			}
		case "default_environment":
			var name string
			if name, err = nonEmpty(v, path); err == nil {
				s.DefaultEnvironment, err = environmentName(v, path, name)
			}
		case "continue_on_step_failure":
			s.ContinueOnStepFailure, err = boolean(v, path)
		case "force_rerun":
			s.ForceRerun, err = boolean(v, path)
		}
		return err
	})
}

// Shape is the pipeline as rules/pipeline sees it.
func (p *PipelineJob) Shape() pipeline.Pipeline {
	out := pipeline.Pipeline{Inputs: map[string]string{}}
	for name, in := range p.Inputs {
		out.Inputs[name] = ruleType(in)
	}
	for _, name := range p.Order {
		s := p.Jobs[name]
		rs := pipeline.Step{Name: name, Outputs: map[string]string{}}
		for _, in := range sortedInputs(s.Inputs) {
			ri := pipeline.Input{Name: in.name, Type: ruleType(in.Input)}
			if b := in.Binding; b != nil {
				ri.Binding = pipeline.Binding{Path: s.bindingPath(name, in.name), Step: b.Step, Output: b.Output, ParentInput: b.ParentInput}
			}
			rs.Inputs = append(rs.Inputs, ri)
		}
		for o, out := range s.Outputs {
			rs.Outputs[o] = out.Type
		}
		out.Steps = append(out.Steps, rs)
	}
	return out
}

// bindingPath is the YAML path a step's input binding is written at: the input's value
// or its path.
func (s *Step) bindingPath(step, input string) string {
	p := "jobs." + step + ".inputs." + input
	if _, ok := s.Lines[p+".path"]; ok {
		return p + ".path"
	}
	return p
}

func ruleType(in Input) string {
	if in.Literal != "" {
		return pipeline.TypeLiteral
	}
	return in.Type
}

type namedInput struct {
	name string
	Input
}

func sortedInputs(m map[string]Input) []namedInput {
	out := make([]namedInput, 0, len(m))
	for name, in := range m {
		out = append(out, namedInput{name, in})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// check refuses, each error at its YAML path and line, what rules/pipeline.Validate
// finds (an unknown step, output or pipeline input, a type mismatch, a cycle), a step
// output bound to an undeclared pipeline output, and a pipeline output bound twice or
// never.
func (p *PipelineJob) check() error {
	var errs []error
	at := func(path, format string, args ...any) {
		errs = append(errs, &Error{Line: p.Lines[path], Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	for _, e := range pipeline.Validate(p.Shape()) {
		at(e.Path, "%s", e.Message)
	}
	boundBy := map[string]string{}
	for _, step := range p.Order {
		s := p.Jobs[step]
		for _, o := range slices.Sorted(maps.Keys(s.Outputs)) {
			parent := s.Outputs[o].ParentOutput
			if parent == "" {
				continue
			}
			path := "jobs." + step + ".outputs." + o
			switch _, ok := p.Outputs[parent]; {
			case !ok:
				at(path, "unknown pipeline output %q (outputs: %s)", parent, names(p.Outputs))
			case boundBy[parent] != "":
				at(path, "pipeline output %q is already bound by %s", parent, boundBy[parent])
			default:
				boundBy[parent] = path
			}
		}
	}
	for _, o := range slices.Sorted(maps.Keys(p.Outputs)) {
		if boundBy[o] == "" {
			at("outputs."+o, "no step binds pipeline output %q: give a step's output the value ${{parent.outputs.%s}}", o, o)
		}
	}
	return errors.Join(errs...)
}

// fillBoundTypes gives a step output bound to a pipeline output the pipeline output's
// type and mode, then a bound input left without a type the type of what it is bound to.
// A binding to what does not exist is left alone, for check to refuse.
func (p *PipelineJob) fillBoundTypes() {
	for _, s := range p.Jobs {
		for name, o := range s.Outputs {
			if decl, ok := p.Outputs[o.ParentOutput]; ok && o.ParentOutput != "" {
				o.Type, o.Mode = decl.Type, decl.Mode
				s.Outputs[name] = o
			}
		}
	}
	for _, s := range p.Jobs {
		for name, in := range s.Inputs {
			b := in.Binding
			if b == nil || in.Type != "" {
				continue
			}
			if from, ok := p.Inputs[b.ParentInput]; ok && b.ParentInput != "" {
				in.Type, in.Literal = from.Type, from.Literal
			} else if up, ok := p.Jobs[b.Step]; ok && b.Step != "" {
				in.Type = up.Outputs[b.Output].Type
			}
			s.Inputs[name] = in
		}
	}
}
