package jobspec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/pipeline"
)

// threeSteps is a pipeline with every key: prep reads the pipeline's raw input, train
// reads prep's output (value form) and a literal pipeline input, score reads both
// upstream outputs (path form) and registers the pipeline's output.
const threeSteps = `$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
name: mnist-pipeline
display_name: MNIST
experiment_name: mnist
description: prep, train, score
tags:
  owner: ana
inputs:
  raw:
    type: uri_folder
    path: ./data
  lr: 0.01
outputs:
  scores:
    type: uri_file
settings:
  default_compute: azureml:cpu
  default_environment: azureml:py@latest
  continue_on_step_failure: true
  force_rerun: false
jobs:
  prep:
    type: command
    code: ./prep
    command: python prep.py ${{inputs.raw}} ${{outputs.clean}}
    inputs:
      raw: ${{parent.inputs.raw}}
    outputs:
      clean:
  train:
    command: python train.py ${{inputs.data}} ${{inputs.lr}} ${{outputs.model}}
    compute: azureml:gpu
    environment: azureml:torch
    is_deterministic: false
    retry_settings:
      max_retries: 2
      timeout: 600
    limits:
      timeout: 3600
    inputs:
      data: ${{parent.jobs.prep.outputs.clean}}
      lr: ${{parent.inputs.lr}}
    outputs:
      model:
        type: uri_folder
  score:
    command: python score.py ${{inputs.model}} ${{inputs.data}} ${{outputs.out}}
    inputs:
      model:
        type: uri_folder
        path: ${{parent.jobs.train.outputs.model}}
        mode: ro_mount
      data:
        path: ${{ parent.jobs.prep.outputs.clean }}
    outputs:
      out: ${{parent.outputs.scores}}
`

func TestParsePipeline(t *testing.T) {
	spec, err := Parse([]byte(threeSteps))
	if err != nil {
		t.Fatal(err)
	}
	p := spec.Pipeline
	if spec.Type != TypePipeline || p == nil || spec.Command != nil {
		t.Fatalf("spec = %+v", spec)
	}
	if p.Name != "mnist-pipeline" || p.DisplayName != "MNIST" || p.ExperimentName != "mnist" || p.Description != "prep, train, score" || p.Tags["owner"] != "ana" {
		t.Errorf("pipeline's own keys: %+v", p)
	}
	if want := (Settings{DefaultCompute: "cpu", DefaultEnvironment: "py", ContinueOnStepFailure: true}); p.Settings != want {
		t.Errorf("settings = %+v, want %+v", p.Settings, want)
	}
	if !reflect.DeepEqual(p.Order, []string{"prep", "train", "score"}) {
		t.Errorf("order = %v", p.Order)
	}
	if want := map[string]Input{"raw": {Type: URIFolder, Path: "./data", Mode: ModeDownload}, "lr": {Literal: LiteralNumber, Value: "0.01"}}; !reflect.DeepEqual(p.Inputs, want) {
		t.Errorf("pipeline inputs = %+v", p.Inputs)
	}
	if want := map[string]Output{"scores": {Type: URIFile, Mode: ModeUpload}}; !reflect.DeepEqual(p.Outputs, want) {
		t.Errorf("pipeline outputs = %+v", p.Outputs)
	}

	prep, train, score := p.Jobs["prep"], p.Jobs["train"], p.Jobs["score"]
	// Defaults: compute and environment from settings, deterministic, no retries.
	if prep.Compute != "cpu" || prep.ComputePath != "settings.default_compute" || prep.Environment != "py" || prep.EnvironmentPath != "settings.default_environment" ||
		!prep.IsDeterministic || prep.Retry != (RetrySettings{}) || prep.Code != "./prep" {
		t.Errorf("prep = %+v", prep)
	}
	if got := prep.Inputs["raw"]; !reflect.DeepEqual(got, Input{Type: URIFolder, Mode: ModeDownload, Binding: &Binding{ParentInput: "raw"}}) {
		t.Errorf("prep.raw = %+v", got)
	}
	// A step's own keys win over the settings.
	if train.Compute != "gpu" || train.ComputePath != "jobs.train.compute" || train.Environment != "torch" || train.EnvironmentPath != "jobs.train.environment" ||
		train.IsDeterministic || train.Retry != (RetrySettings{MaxRetries: 2, Timeout: 10 * time.Minute}) || train.Timeout != time.Hour {
		t.Errorf("train = %+v", train)
	}
	// A bound input without a type takes the type of what it is bound to.
	if got := train.Inputs["data"]; !reflect.DeepEqual(got, Input{Type: URIFolder, Mode: ModeDownload, Binding: &Binding{Step: "prep", Output: "clean"}}) {
		t.Errorf("train.data = %+v", got)
	}
	if got := train.Inputs["lr"]; !reflect.DeepEqual(got, Input{Literal: LiteralNumber, Mode: ModeDownload, Binding: &Binding{ParentInput: "lr"}}) {
		t.Errorf("train.lr = %+v", got)
	}
	if got := score.Inputs["model"]; !reflect.DeepEqual(got, Input{Type: URIFolder, Mode: ModeROMount, Binding: &Binding{Step: "train", Output: "model"}}) {
		t.Errorf("score.model = %+v", got)
	}
	if got := score.Inputs["data"]; got.Binding == nil || *got.Binding != (Binding{Step: "prep", Output: "clean"}) || got.Path != "" {
		t.Errorf("score.data = %+v", got)
	}
	// A step output bound to a pipeline output takes its type.
	if got := score.Outputs["out"]; got != (Output{Type: URIFile, Mode: ModeUpload, ParentOutput: "scores"}) {
		t.Errorf("score.out = %+v", got)
	}
	for path, line := range map[string]int{"settings.default_compute": 18, "jobs.prep": 23, "jobs.train.compute": 33, "jobs.train.retry_settings.max_retries": 37, "jobs.score.inputs.model.path": 52} {
		if p.Lines[path] != line {
			t.Errorf("line of %s = %d, want %d", path, p.Lines[path], line)
		}
	}

	// The shape given to rules/pipeline: what Decide will be fed.
	shape := p.Shape()
	if len(shape.Steps) != 3 || !reflect.DeepEqual(shape.Steps[2].Upstream(), []string{"prep", "train"}) ||
		shape.Inputs["lr"] != pipeline.TypeLiteral || shape.Steps[2].Inputs[1].Binding.Path != "jobs.score.inputs.model.path" {
		t.Errorf("shape = %+v", shape)
	}
}

// step is a one-line step for the error cases.
func step(name, body string) string {
	return "  " + name + ":\n    command: echo\n" + body
}

func TestParsePipelineErrors(t *testing.T) {
	const head = "type: pipeline\nsettings:\n  default_compute: cpu\n"
	cases := []struct {
		name, yaml string
		want       []string // every message, whole: line, YAML path, what is wrong
	}{
		{"no jobs", "type: pipeline\n", []string{"line 1: jobs: a pipeline needs at least one step"}},
		{"empty jobs", "type: pipeline\njobs: {}\n", []string{"line 1: jobs: a pipeline needs at least one step"}},
		{"unknown pipeline key", "type: pipeline\ncompute: cpu\n", []string{`line 2: compute: unknown key "compute" (allowed here: $schema, type, name`}},
		{"unknown setting", "type: pipeline\nsettings:\n  continue_on_failure: true\n", []string{`line 3: settings.continue_on_failure: unknown key "continue_on_failure" (allowed here: default_compute, default_environment, continue_on_step_failure, force_rerun)`}},
		{"setting not a bool", "type: pipeline\nsettings:\n  force_rerun: yes please\n", []string{`line 3: settings.force_rerun: "yes please" is not allowed (allowed: true, false)`}},
		{"pinned default environment", "type: pipeline\nsettings:\n  default_environment: azureml:py:2\n", []string{`line 3: settings.default_environment: "azureml:py:2" is not an environment name`}},
		{"step not a mapping", head + "jobs:\n  a: echo\n", []string{`line 5: jobs.a: expected a mapping of keys, got "echo"`}},
		{"bad step name", head + "jobs:\n" + step("my-step", ""), []string{`line 5: jobs.my-step: step name "my-step" must start with a letter or '_'`}},
		{"unknown step key", head + "jobs:\n" + step("a", "    retries: 2\n"), []string{`line 7: jobs.a.retries: unknown key "retries" (allowed here: $schema, type, name, display_name, experiment_name, description, tags, code, command, environment, compute, resources, environment_variables, inputs, outputs, limits, is_deterministic, retry_settings)`}},
		{"step of another type", head + "jobs:\n" + step("a", "    type: sweep\n"), []string{`line 7: jobs.a.type: a step is a command job (type: command); "sweep" steps are not supported`}},
		{"step without command", head + "jobs:\n  a:\n    compute: cpu\n", []string{"line 6: jobs.a: the job has no command"}},
		{"step without compute", "type: pipeline\njobs:\n" + step("a", ""), []string{"line 3: jobs.a: the step has no compute: set jobs.a.compute or settings.default_compute"}},
		{"is_deterministic not a bool", head + "jobs:\n" + step("a", "    is_deterministic: 1\n"), []string{`line 7: jobs.a.is_deterministic: "1" is not allowed (allowed: true, false)`}},
		{"negative retries", head + "jobs:\n" + step("a", "    retry_settings:\n      max_retries: -1\n"), []string{`line 8: jobs.a.retry_settings.max_retries: "-1" is not a whole number of retries of at least 0`}},
		{"bad retry timeout", head + "jobs:\n" + step("a", "    retry_settings:\n      timeout: later\n"), []string{`line 8: jobs.a.retry_settings.timeout: "later" is not a timeout`}},
		{"unknown retry key", head + "jobs:\n" + step("a", "    retry_settings:\n      delay: 5\n"), []string{`line 8: jobs.a.retry_settings.delay: unknown key "delay" (allowed here: max_retries, timeout)`}},
		{"parent binding in a command", head + "jobs:\n  a:\n    command: echo ${{parent.inputs.x}}\n", []string{"line 6: jobs.a.command: ${{parent.inputs.x}} is not supported"}},
		{"binding with text around", head + "jobs:\n" + step("a", "    inputs:\n      d: data-${{parent.inputs.x}}\n"), []string{`line 8: jobs.a.inputs.d: "data-${{parent.inputs.x}}" is not a binding: a step's input takes ${{parent.inputs.<name>}} or ${{parent.jobs.<step>.outputs.<name>}}, alone`}},
		{"output binding as an input", head + "jobs:\n" + step("a", "    inputs:\n      d: ${{parent.outputs.y}}\n"), []string{`line 8: jobs.a.inputs.d: "${{parent.outputs.y}}" is an output binding`}},
		{"input binding as an output", head + "jobs:\n" + step("a", "    outputs:\n      o: ${{parent.inputs.x}}\n"), []string{`line 8: jobs.a.outputs.o: "${{parent.inputs.x}}": a step's output takes ${{parent.outputs.<name>}}`}},
		{"binding in a pipeline input", "type: pipeline\ninputs:\n  x: ${{parent.inputs.y}}\n", []string{`line 3: inputs.x: "${{parent.inputs.y}}": bindings are taken only in a pipeline's steps`}},
		{"unknown pipeline input", head + "inputs:\n  raw:\n    path: ./d\njobs:\n" + step("a", "    inputs:\n      d: ${{parent.inputs.rwa}}\n"),
			[]string{`line 11: jobs.a.inputs.d: unknown pipeline input "rwa" (inputs: raw)`}},
		{"unknown step", head + "jobs:\n" + step("a", "    inputs:\n      d:\n        path: ${{parent.jobs.b.outputs.o}}\n"),
			[]string{`line 9: jobs.a.inputs.d.path: unknown step "b" (steps: a)`}},
		{"unknown step output", head + "jobs:\n" + step("a", "    outputs:\n      o:\n") + step("b", "    inputs:\n      d: ${{parent.jobs.a.outputs.out}}\n"),
			[]string{`line 12: jobs.b.inputs.d: step "a" has no output "out" (outputs: o)`}},
		{"type mismatch", head + "jobs:\n" + step("a", "    outputs:\n      o:\n") + step("b", "    inputs:\n      d:\n        type: uri_file\n        path: ${{parent.jobs.a.outputs.o}}\n"),
			[]string{`line 14: jobs.b.inputs.d.path: input "d" is uri_file but output a.o is uri_folder`}},
		{"literal into a path input", head + "inputs:\n  lr: 0.1\njobs:\n" + step("a", "    inputs:\n      d:\n        type: uri_folder\n        path: ${{parent.inputs.lr}}\n"),
			[]string{`line 12: jobs.a.inputs.d.path: input "d" is uri_folder but pipeline input "lr" is literal`}},
		{"cycle, and every error at once", head + "jobs:\n" +
			step("a", "    inputs:\n      d: ${{parent.jobs.c.outputs.o}}\n    outputs:\n      o:\n") +
			step("b", "    inputs:\n      d: ${{parent.jobs.a.outputs.o}}\n      e: ${{parent.jobs.a.outputs.nope}}\n    outputs:\n      o:\n") +
			step("c", "    inputs:\n      d: ${{parent.jobs.b.outputs.o}}\n    outputs:\n      o:\n"),
			[]string{`line 5: jobs.a: steps form a cycle: a -> b -> c -> a`, `line 15: jobs.b.inputs.e: step "a" has no output "nope" (outputs: o)`}},
		{"unknown pipeline output", head + "jobs:\n" + step("a", "    outputs:\n      o: ${{parent.outputs.model}}\n"),
			[]string{`line 8: jobs.a.outputs.o: unknown pipeline output "model" (outputs: none)`}},
		{"pipeline output bound twice", head + "outputs:\n  m:\njobs:\n" + step("a", "    outputs:\n      o: ${{parent.outputs.m}}\n") + step("b", "    outputs:\n      o: ${{parent.outputs.m}}\n"),
			[]string{`line 14: jobs.b.outputs.o: pipeline output "m" is already bound by jobs.a.outputs.o`}},
		{"pipeline output never bound", head + "outputs:\n  m:\njobs:\n" + step("a", ""),
			[]string{`line 5: outputs.m: no step binds pipeline output "m": give a step's output the value ${{parent.outputs.m}}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !IsError(err) {
				t.Fatalf("error %q is not a file error", err)
			}
			var msgs []string
			if joined, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range joined.Unwrap() {
					msgs = append(msgs, e.Error())
				}
			} else {
				msgs = []string{err.Error()}
			}
			if len(msgs) != len(tc.want) {
				t.Fatalf("errors %q; want %d: %q", msgs, len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				if !strings.Contains(msgs[i], want) {
					t.Errorf("error %d %q; want it to hold %q", i, msgs[i], want)
				}
			}
		})
	}
}

// A step's input binding is reported at the line it is written on, in both forms.
func TestPipelineErrorIsFileError(t *testing.T) {
	_, err := Parse([]byte("type: pipeline\nsettings:\n  default_compute: cpu\njobs:\n  a:\n    command: echo\n    inputs:\n      d: ${{parent.inputs.x}}\n"))
	var e *Error
	if !errors.As(err, &e) || e.Line != 8 || e.Path != "jobs.a.inputs.d" {
		t.Fatalf("error %#v", err)
	}
}
