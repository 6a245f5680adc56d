package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Status is a step's state, as far as the rule needs it.
type Status string

// Step states. A step that has been started but has not ended (queued, preparing or
// running) is Running here: the rule only needs to know that it is in flight.
const (
	Pending   Status = "Pending"
	Running   Status = "Running"
	Completed Status = "Completed"
	Failed    Status = "Failed"
	Canceled  Status = "Canceled"
	Skipped   Status = "Skipped"
)

// Terminal reports whether a step in this state has ended.
func (s Status) Terminal() bool {
	return s == Completed || s == Failed || s == Canceled || s == Skipped
}

// Data types of inputs and outputs.
const (
	TypeFolder  = "uri_folder"
	TypeFile    = "uri_file"
	TypeLiteral = "literal"
)

// Binding says where an input's value comes from. Exactly one of its forms is set:
// Step and Output for an upstream step's output, ParentInput for a pipeline input, or
// neither for a literal.
type Binding struct {
	// Path is where the binding is written, as a YAML path ("jobs.train.inputs.data"),
	// for messages.
	Path        string
	Step        string
	Output      string
	ParentInput string
}

// Input is one input of a step.
type Input struct {
	Name    string
	Type    string // TypeFolder, TypeFile or TypeLiteral
	Binding Binding
}

// Step is one step of a pipeline.
type Step struct {
	Name    string
	Inputs  []Input
	Outputs map[string]string // output name -> type
}

// Pipeline is the shape of a pipeline job.
type Pipeline struct {
	Steps  []Step
	Inputs map[string]string // pipeline input name -> type
}

// Error is a refusal of a pipeline's shape, at the YAML path that causes it.
type Error struct {
	Path    string
	Message string
}

func (e Error) Error() string { return e.Path + ": " + e.Message }

// Validate checks that every binding names a step, output or pipeline input that exists,
// with a type the input accepts, and that the steps form no cycle. It returns every error
// it finds, ordered by path.
func Validate(p Pipeline) []Error {
	steps := make(map[string]Step, len(p.Steps))
	for _, s := range p.Steps {
		steps[s.Name] = s
	}
	var errs []Error
	for _, s := range p.Steps {
		for _, in := range s.Inputs {
			b := in.Binding
			switch {
			case b.Step != "":
				up, ok := steps[b.Step]
				if !ok {
					errs = append(errs, Error{b.Path, fmt.Sprintf("unknown step %q (steps: %s)", b.Step, strings.Join(names(steps), ", "))})
					continue
				}
				if b.Step == s.Name {
					errs = append(errs, Error{b.Path, fmt.Sprintf("step %q binds its own output %q", s.Name, b.Output)})
					continue
				}
				typ, ok := up.Outputs[b.Output]
				if !ok {
					errs = append(errs, Error{b.Path, fmt.Sprintf("step %q has no output %q (outputs: %s)", b.Step, b.Output, strings.Join(slices.Sorted(maps.Keys(up.Outputs)), ", "))})
					continue
				}
				if !compatible(in.Type, typ) {
					errs = append(errs, Error{b.Path, fmt.Sprintf("input %q is %s but output %s.%s is %s", in.Name, in.Type, b.Step, b.Output, typ)})
				}
			case b.ParentInput != "":
				typ, ok := p.Inputs[b.ParentInput]
				if !ok {
					errs = append(errs, Error{b.Path, fmt.Sprintf("unknown pipeline input %q (inputs: %s)", b.ParentInput, strings.Join(slices.Sorted(maps.Keys(p.Inputs)), ", "))})
					continue
				}
				if !compatible(in.Type, typ) {
					errs = append(errs, Error{b.Path, fmt.Sprintf("input %q is %s but pipeline input %q is %s", in.Name, in.Type, b.ParentInput, typ)})
				}
			}
		}
	}
	if cycle := findCycle(p.Steps, steps); cycle != nil {
		errs = append(errs, Error{"jobs." + cycle[0], "steps form a cycle: " + strings.Join(cycle, " -> ")})
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
	return errs
}

// compatible reports whether an input of type in may take a value of type from. An input
// whose type is not declared ("") takes what it is given.
func compatible(in, from string) bool {
	return in == "" || from == "" || in == from
}

// Upstream returns the steps a step binds outputs of, sorted, without repeats.
func (s Step) Upstream() []string {
	seen := map[string]bool{}
	var out []string
	for _, in := range s.Inputs {
		if up := in.Binding.Step; up != "" && !seen[up] {
			seen[up] = true
			out = append(out, up)
		}
	}
	sort.Strings(out)
	return out
}

// findCycle returns the steps of one cycle, the first repeated at the end
// ("a -> b -> a"), or nil. Steps are visited in name order, so the answer is stable.
func findCycle(list []Step, steps map[string]Step) []string {
	const (
		unseen = iota
		onPath
		done
	)
	mark := make(map[string]int, len(list))
	var path []string
	var visit func(name string) []string
	visit = func(name string) []string {
		mark[name] = onPath
		path = append(path, name)
		for _, up := range steps[name].Upstream() {
			if _, ok := steps[up]; !ok || up == name { // a self-binding is reported on its own
				continue
			}
			switch mark[up] {
			case onPath:
				i := indexOf(path, up)
				cycle := append(append([]string{}, path[i:]...), up)
				return cycle
			case unseen:
				if c := visit(up); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[name] = done
		return nil
	}
	for _, name := range names(steps) {
		if mark[name] == unseen {
			if c := visit(name); c != nil {
				// Edges were followed from a step to its upstream; show them in the order
				// data flows.
				for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
					c[i], c[j] = c[j], c[i]
				}
				return c
			}
		}
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func names(steps map[string]Step) []string {
	out := make([]string, 0, len(steps))
	for n := range steps {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
