package provider

import (
	"errors"
	"strings"
	"testing"
)

func TestDestroyCommand(t *testing.T) {
	cases := []struct {
		args string
		env  map[string]string
		want bool
	}{
		{args: "destroy -auto-approve", want: true},
		{args: "-chdir=infra destroy", want: true},
		{args: "apply -destroy -auto-approve", want: true},
		{args: "apply --destroy", want: true},
		{args: "plan -destroy=true -out=p", want: true},
		{args: "plan", env: map[string]string{"TF_CLI_ARGS_plan": "-destroy"}, want: true},
		{args: "apply", env: map[string]string{"TF_CLI_ARGS": "-destroy -input=false"}, want: true},
		{args: "apply -auto-approve", want: false},
		{args: "plan -destroy=false", want: false},
		{args: "plan", env: map[string]string{"TF_CLI_ARGS_apply": "-destroy"}, want: false},
		{args: "validate", want: false},
		{args: "-chdir=destroy plan", want: false},
		{args: "", want: false},
	}
	for _, tc := range cases {
		getenv := func(k string) string { return tc.env[k] }
		if got := destroyCommand(strings.Fields(tc.args), getenv); got != tc.want {
			t.Errorf("destroyCommand(%q, %v) = %v; want %v", tc.args, tc.env, got, tc.want)
		}
	}
}

func TestServesDestroy_OnlyAsTerraformsChild(t *testing.T) {
	parent := func() ([]string, error) { return []string{"terraform", "destroy"}, nil }
	cookie := func(k string) string {
		if k == pluginCookieEnv {
			return "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"
		}
		return ""
	}
	if !servesDestroy(cookie, parent) {
		t.Error("terraform destroy's child does not serve a destroy")
	}
	if servesDestroy(func(string) string { return "" }, parent) {
		t.Error("a process without terraform's plugin cookie (not its child) serves a destroy")
	}
	if servesDestroy(cookie, func() ([]string, error) { return nil, errors.New("no procfs") }) {
		t.Error("a parent command line that cannot be read counts as a destroy")
	}
}
