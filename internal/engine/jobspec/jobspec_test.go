package jobspec

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// full is a job with every key the parser takes.
const full = `$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
type: command
name: train-1
display_name: Train one
experiment_name: mnist
description: trains a model
tags:
  owner: ana
  stage: dev
code: ./src
command: python train.py --data ${{inputs.data}} --lr ${{inputs.lr}} --out ${{ outputs.model }}
environment: azureml:torch@latest
compute: azureml:gpu
resources:
  instance_count: 2
  instance_type: Standard_DS3_v2
environment_variables:
  SEED: "7"
inputs:
  data:
    type: uri_folder
    path: ./data
    mode: ro_mount
  base:
    type: uri_file
    path: azureml://jobs/prep/outputs/weights
  lr: 0.01
  epochs: 3
  name: resnet
  fast: true
outputs:
  model:
    type: uri_folder
    mode: rw_mount
  metrics:
  report:
    type: uri_file
limits:
  timeout: 3600
`

func TestParseEveryKey(t *testing.T) {
	spec, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	c := spec.Command
	if spec.Type != TypeCommand || c == nil {
		t.Fatalf("spec = %+v", spec)
	}
	want := CommandJob{
		Names: Names{Name: "train-1", DisplayName: "Train one", ExperimentName: "mnist", Description: "trains a model",
			Tags: map[string]string{"owner": "ana", "stage": "dev"}}, Code: "./src",
		Command:     "python train.py --data ${{inputs.data}} --lr ${{inputs.lr}} --out ${{ outputs.model }}",
		Environment: "torch", Compute: "gpu", InstanceCount: 2, InstanceType: "Standard_DS3_v2",
		EnvVars: map[string]string{"SEED": "7"},
		Inputs: map[string]Input{
			"data":   {Type: URIFolder, Path: "./data", Mode: ModeROMount},
			"base":   {Type: URIFile, Path: "azureml://jobs/prep/outputs/weights", Mode: ModeDownload},
			"lr":     {Literal: LiteralNumber, Value: "0.01"},
			"epochs": {Literal: LiteralNumber, Value: "3"},
			"name":   {Literal: LiteralString, Value: "resnet"},
			"fast":   {Literal: LiteralBoolean, Value: "true"},
		},
		Outputs: map[string]Output{
			"model":   {Type: URIFolder, Mode: ModeRWMount},
			"metrics": {Type: URIFolder, Mode: ModeUpload},
			"report":  {Type: URIFile, Mode: ModeUpload},
		},
		Timeout: time.Hour,
	}
	got := *c
	got.Lines = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", got, want)
	}
	for path, line := range map[string]int{"name": 3, "compute": 13, "resources.instance_count": 15, "inputs.data.mode": 23, "limits.timeout": 39} {
		if c.Lines[path] != line {
			t.Errorf("line of %s = %d, want %d", path, c.Lines[path], line)
		}
	}
}

func TestParseDefaults(t *testing.T) {
	spec, err := Parse([]byte("command: echo hi\ncompute: cpu\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := spec.Command
	if spec.Type != TypeCommand || c.InstanceCount != 1 || c.Compute != "cpu" || c.Timeout != 0 || c.Environment != "" {
		t.Fatalf("defaults: %+v", c)
	}
	spec, err = Parse([]byte("command: cat ${{inputs.d}}\ninputs:\n  d:\n    path: x\nlimits:\n  timeout: 90m\nenvironment: py\n"))
	if err != nil {
		t.Fatal(err)
	}
	if in := spec.Command.Inputs["d"]; in.Type != URIFolder || in.Mode != ModeDownload || spec.Command.Timeout != 90*time.Minute || spec.Command.Environment != "py" {
		t.Fatalf("input defaults: %+v", spec.Command)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		// want is the whole message: the line, the YAML path and what is wrong.
		want string
	}{
		{"not yaml", "command: [", "not valid YAML"},
		{"empty", "", "the file is empty"},
		{"not a mapping", "- a\n- b\n", "line 1: a job is a mapping"},
		{"unknown top key", "command: x\ncomand: y\n", `line 2: comand: unknown key "comand" (allowed here: $schema, type, name`},
		{"unknown resources key", "command: x\nresources:\n  gpus: 2\n", `line 3: resources.gpus: unknown key "gpus" (allowed here: instance_count, instance_type)`},
		{"unknown input key", "command: x\ninputs:\n  d:\n    path: a\n    datastore: b\n", `line 5: inputs.d.datastore: unknown key "datastore" (allowed here: type, path, mode)`},
		{"unknown output key", "command: x\noutputs:\n  m:\n    path: a\n", `line 4: outputs.m.path: unknown key "path" (allowed here: type, mode)`},
		{"unknown limits key", "command: x\nlimits:\n  max_trials: 2\n", `line 3: limits.max_trials: unknown key "max_trials" (allowed here: timeout)`},
		{"duplicate key", "command: x\ncommand: y\n", `line 2: command: key "command" is given twice`},
		{"sweep", "type: sweep\n", `line 1: type: unknown job type "sweep" (allowed: command, pipeline)`},
		{"binding in a command job", "command: x\ninputs:\n  d: ${{parent.inputs.x}}\n", `line 3: inputs.d: "${{parent.inputs.x}}": bindings are taken only in a pipeline's steps (type: pipeline)`},
		{"no command", "compute: cpu\n", "line 1: the job has no command"},
		{"empty command", "command: ''\n", "line 1: command: is empty"},
		{"command a list", "command:\n  - a\n", "line 2: command: expected a single value, got a list"},
		{"bad name", "command: x\nname: -x\n", `line 2: name: job name "-x" must start with a letter or digit`},
		{"tags not a map", "command: x\ntags: a\n", `line 2: tags: expected a mapping of keys, got "a"`},
		{"tag a list", "command: x\ntags:\n  a: [1]\n", "line 3: tags.a: expected a single value, got a list"},
		{"env var a map", "command: x\nenvironment_variables:\n  A:\n    b: c\n", "line 4: environment_variables.A: expected a single value, got a mapping"},
		{"inline environment", "command: x\nenvironment:\n  image: python\n", "line 3: environment: an inline environment is not supported"},
		{"pinned environment", "command: x\nenvironment: azureml:torch:3\n", `line 2: environment: "azureml:torch:3" is not an environment name`},
		{"compute prefix only", "command: x\ncompute: 'azureml:'\n", `line 2: compute: "azureml:" names no compute`},
		{"instance count zero", "command: x\nresources:\n  instance_count: 0\n", `line 3: resources.instance_count: "0" is not a whole number of nodes of at least 1`},
		{"instance count text", "command: x\nresources:\n  instance_count: '2'\n", `line 3: resources.instance_count: "2" is not a whole number`},
		{"empty instance type", "command: x\nresources:\n  instance_type: ''\n", "line 3: resources.instance_type: is empty"},
		{"bad input type", "command: x\ninputs:\n  d:\n    type: mltable\n    path: a\n", `line 4: inputs.d.type: "mltable" is not allowed (allowed: uri_folder, uri_file)`},
		{"bad input mode", "command: x\ninputs:\n  d:\n    path: a\n    mode: upload\n", `line 5: inputs.d.mode: "upload" is not allowed (allowed: download, ro_mount)`},
		{"input without path", "command: x\ninputs:\n  d:\n    type: uri_file\n", "line 4: inputs.d: a uri_file input needs a path"},
		{"input a list", "command: x\ninputs:\n  d: [1]\n", "line 3: inputs.d: expected a mapping of keys, got a list"},
		{"input null", "command: x\ninputs:\n  d:\n", "line 3: inputs.d: an input is a string, a number, a boolean, or a mapping with type and path; got nothing"},
		{"bad input name", "command: x\ninputs:\n  my-data: 1\n", `line 3: inputs.my-data: input name "my-data" must start with a letter`},
		{"bad azureml path", "command: x\ninputs:\n  d:\n    path: azureml:data:1\n", `line 4: inputs.d.path: "azureml:data:1" is not a job's output`},
		{"remote path", "command: x\ninputs:\n  d:\n    path: https://x/y\n", `line 4: inputs.d.path: "https://x/y" is not supported`},
		{"bad output type", "command: x\noutputs:\n  m:\n    type: mlflow_model\n", `line 4: outputs.m.type: "mlflow_model" is not allowed (allowed: uri_folder, uri_file)`},
		{"bad output mode", "command: x\noutputs:\n  m:\n    mode: download\n", `line 4: outputs.m.mode: "download" is not allowed (allowed: upload, rw_mount)`},
		{"output a value", "command: x\noutputs:\n  m: dir\n", `line 3: outputs.m: expected a mapping of keys, got "dir"`},
		{"bad output name", "command: x\noutputs:\n  1m:\n", `line 3: outputs.1m: output name "1m" must start with a letter`},
		{"bad timeout", "command: x\nlimits:\n  timeout: soon\n", `line 3: limits.timeout: "soon" is not a timeout`},
		{"zero timeout", "command: x\nlimits:\n  timeout: 0\n", `line 3: limits.timeout: "0" is not a timeout`},
		{"undeclared input", "command: cat ${{inputs.d}}\n", `line 1: command: ${{inputs.d}} names input "d", which the job does not declare (inputs: none)`},
		{"undeclared output", "command: cp a ${{outputs.m}}\noutputs:\n  n:\n", `line 1: command: ${{outputs.m}} names output "m", which the job does not declare (outputs: n)`},
		{"other binding", "command: echo ${{search_space.lr}}\n", "line 1: command: ${{search_space.lr}} is not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !IsError(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q; want it to hold %q", err, tc.want)
			}
		})
	}
}

func TestParseJobOutputURI(t *testing.T) {
	for path, want := range map[string][2]string{
		"azureml://jobs/job-1/outputs/model": {"job-1", "model"},
		"azureml://jobs//outputs/model":      {},
		"azureml://jobs/a/outputs/":          {},
		"azureml://jobs/a/outputs/b/c":       {},
		"azureml://datastores/x/paths/y":     {},
		"./data":                             {},
	} {
		job, out, ok := api.ParseJobOutputURI(path)
		if ok != (want[0] != "") || job != want[0] || out != want[1] {
			t.Errorf("ParseJobOutputURI(%q) = %q, %q, %v", path, job, out, ok)
		}
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute("a ${{inputs.x}} b ${{ outputs.y }} c", func(kind, name string) string { return "<" + kind + ":" + name + ">" })
	if got != "a <inputs:x> b <outputs:y> c" {
		t.Fatalf("Substitute = %q", got)
	}
}
