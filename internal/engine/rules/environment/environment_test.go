package environment

import (
	"slices"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestNormaliseMakesEquivalentInputsOneHash(t *testing.T) {
	a := Normalise(&api.PythonEnvironment{Requirements: []string{"b==2", " a==1 ", "", "b==2"}, FindLinks: []string{"/w", "/w"}}, nil)
	b := Normalise(&api.PythonEnvironment{Requirements: []string{"a==1", "b==2"}, FindLinks: []string{" /w"}, Python: "python3"}, nil)
	if ContentHash(a) != ContentHash(b) {
		t.Fatalf("equivalent definitions hash differently: %+v vs %+v", *a.Python, *b.Python)
	}
	if !slices.Equal(a.Python.Requirements, []string{"a==1", "b==2"}) || a.Python.Python != "python3" {
		t.Fatalf("normalised: %+v", *a.Python)
	}
}

func TestContentHashChangesWithEveryInput(t *testing.T) {
	base := api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/w"}}
	seen := map[string]string{}
	for name, d := range map[string]Definition{
		"base":         Normalise(&base, nil),
		"requirement":  Normalise(&api.PythonEnvironment{Requirements: []string{"a==2"}, FindLinks: []string{"/w"}}, nil),
		"find_links":   Normalise(&api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/x"}}, nil),
		"index_url":    Normalise(&api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/w"}, IndexURL: "http://i/simple"}, nil),
		"python":       Normalise(&api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/w"}, Python: "python3.11"}, nil),
		"user_managed": Normalise(nil, &api.UserManagedEnvironment{InterpreterPath: "/usr/bin/python3"}),
	} {
		h := ContentHash(d)
		if len(h) != 64 {
			t.Fatalf("%s: hash %q is not hex SHA-256", name, h)
		}
		if other, dup := seen[h]; dup {
			t.Fatalf("%s and %s share hash %s", name, other, h)
		}
		seen[h] = name
	}
}

func TestPipArgsOfflineOnlyWithFindLinksAlone(t *testing.T) {
	offline := PipArgs(api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/w"}})
	if !slices.Contains(offline, "--no-index") || !slices.Contains(offline, "/w") || offline[len(offline)-1] != "a==1" {
		t.Fatalf("find_links alone: %v", offline)
	}
	withIndex := PipArgs(api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/w"}, IndexURL: "http://i/simple"})
	if slices.Contains(withIndex, "--no-index") || !slices.Contains(withIndex, "http://i/simple") {
		t.Fatalf("with index_url: %v", withIndex)
	}
	if got := PipArgs(api.PythonEnvironment{}); got != nil {
		t.Fatalf("no requirements: %v, want nothing to install", got)
	}
}

func TestStepFor(t *testing.T) {
	py := Normalise(&api.PythonEnvironment{}, nil)
	um := Normalise(nil, &api.UserManagedEnvironment{InterpreterPath: "/opt/py/bin/python"})
	if StepFor(nil) != None || StepFor(&py) != Build || StepFor(&um) != Check {
		t.Fatal("wrong steps")
	}
	if InterpreterDir(*um.UserManaged) != "/opt/py/bin" {
		t.Fatal(InterpreterDir(*um.UserManaged))
	}
}
