package pipelines

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/pipeline"
)

// binding is a step input's binding as the API writes it: "parent.inputs.<x>" or
// "parent.jobs.<step>.outputs.<o>".
type binding struct{ parentInput, step, output string }

func parseBinding(s string) (binding, bool) {
	if x, ok := strings.CutPrefix(s, "parent.inputs."); ok && x != "" && !strings.Contains(x, ".") {
		return binding{parentInput: x}, true
	}
	rest, ok := strings.CutPrefix(s, "parent.jobs.")
	if !ok {
		return binding{}, false
	}
	step, out, ok := strings.Cut(rest, ".outputs.")
	if !ok || step == "" || out == "" || strings.Contains(step, ".") || strings.Contains(out, ".") {
		return binding{}, false
	}
	return binding{step: step, output: out}, true
}

// shape turns a submitted pipeline into the rule's shape, refusing a binding that is not
// of either form, naming its YAML path.
func shape(spec api.PipelineSpec) (pipeline.Pipeline, []pipeline.Error) {
	p := pipeline.Pipeline{Inputs: map[string]string{}}
	for name, in := range spec.Inputs {
		p.Inputs[name] = ioType(in)
	}
	var errs []pipeline.Error
	for _, s := range spec.Steps {
		st := pipeline.Step{Name: s.Name, Outputs: map[string]string{}}
		for name, out := range s.Job.Outputs {
			st.Outputs[name] = outType(out)
		}
		for _, name := range slices.Sorted(maps.Keys(s.Job.Inputs)) {
			if _, bound := s.InputBindings[name]; bound {
				continue
			}
			st.Inputs = append(st.Inputs, pipeline.Input{Name: name, Type: ioType(s.Job.Inputs[name])})
		}
		for _, name := range slices.Sorted(maps.Keys(s.InputBindings)) {
			path := "jobs." + s.Name + ".inputs." + name
			b, ok := parseBinding(s.InputBindings[name])
			if !ok {
				errs = append(errs, pipeline.Error{Path: path, Message: fmt.Sprintf("%q is not a binding (parent.inputs.<name> or parent.jobs.<step>.outputs.<name>)", s.InputBindings[name])})
				continue
			}
			typ := ""
			if in, declared := s.Job.Inputs[name]; declared {
				typ = in.Type
			}
			st.Inputs = append(st.Inputs, pipeline.Input{Name: name, Type: typ, Binding: pipeline.Binding{Path: path, Step: b.step, Output: b.output, ParentInput: b.parentInput}})
		}
		p.Steps = append(p.Steps, st)
	}
	return p, errs
}

func ioType(in api.JobInput) string {
	if in.Value != nil {
		return pipeline.TypeLiteral
	}
	if in.Type == "" {
		return api.URIFolder
	}
	return in.Type
}

func outType(out api.JobOutput) string {
	if out.Type == "" {
		return api.URIFolder
	}
	return out.Type
}

// validate checks a submitted pipeline's shape: step names, bindings, types, cycles, and
// the pipeline outputs the steps register. Every error names its YAML path.
func validate(spec api.PipelineSpec) error {
	var errs []pipeline.Error
	seen := map[string]bool{}
	for i, s := range spec.Steps {
		if !stepNameRE.MatchString(s.Name) {
			errs = append(errs, pipeline.Error{Path: fmt.Sprintf("jobs[%d]", i), Message: fmt.Sprintf("step name %q must start with a letter or '_' and hold only letters, digits and '_'", s.Name)})
		}
		if seen[s.Name] {
			errs = append(errs, pipeline.Error{Path: "jobs." + s.Name, Message: "step named twice"})
		}
		seen[s.Name] = true
		for _, out := range slices.Sorted(maps.Keys(s.OutputBindings)) {
			path := "jobs." + s.Name + ".outputs." + out
			if _, ok := s.Job.Outputs[out]; !ok {
				errs = append(errs, pipeline.Error{Path: path, Message: fmt.Sprintf("step %q declares no output %q", s.Name, out)})
			}
			if _, ok := spec.Outputs[s.OutputBindings[out]]; !ok {
				errs = append(errs, pipeline.Error{Path: path, Message: fmt.Sprintf("unknown pipeline output %q (outputs: %s)", s.OutputBindings[out], model.KeyList(spec.Outputs))})
			}
		}
	}
	if len(spec.Steps) == 0 {
		errs = append(errs, pipeline.Error{Path: "jobs", Message: "a pipeline needs at least one step"})
	}
	p, bindErrs := shape(spec)
	errs = append(errs, bindErrs...)
	errs = append(errs, pipeline.Validate(p)...)
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return api.Errorf(api.CodeInvalid, errs[0].Path, "%s", strings.Join(msgs, "; "))
}
