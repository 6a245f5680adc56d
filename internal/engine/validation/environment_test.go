package validation

import (
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestEnvironmentAcceptsGoodInputs(t *testing.T) {
	for _, spec := range []api.EnvironmentSpec{
		{Name: "train", Python: &api.PythonEnvironment{Requirements: []string{"numpy==1.26.4", "torch>=2,<3", "requests[socks] ~= 2.31", "pywin32; sys_platform == 'win32'"}, FindLinks: []string{"/srv/wheels", "https://example.org/wheels"}, IndexURL: "https://pypi.org/simple", Python: "python3.11"}},
		{Name: "bare", Python: &api.PythonEnvironment{}},
		{Name: "conda.x", UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/opt/conda/envs/x/bin/python"}},
	} {
		if err := Environment(spec); err != nil {
			t.Errorf("%s: %v", spec.Name, err)
		}
	}
}

func TestEnvironmentRefusesBadInputsNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		spec  api.EnvironmentSpec
		field string
	}{
		{api.EnvironmentSpec{Name: "-x", Python: &api.PythonEnvironment{}}, "name"},
		{api.EnvironmentSpec{Name: "x"}, "python"},
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{}, UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/usr/bin/python3"}}, "user_managed"},
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{Requirements: []string{"ok==1", "-r reqs.txt"}}}, "python.requirements.1"},
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{Requirements: []string{"numpy=1"}}}, "python.requirements.0"},
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{Requirements: []string{" "}}}, "python.requirements.0"},
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{FindLinks: []string{"wheels"}}}, "python.find_links.0"},
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{IndexURL: "ftp://x"}}, "python.index_url"},
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{Python: "python3; rm -rf /"}}, "python.python"},
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{Python: "bin/python"}}, "python.python"},
		{api.EnvironmentSpec{Name: "x", UserManaged: &api.UserManagedEnvironment{InterpreterPath: "python3"}}, "user_managed.interpreter_path"},
		{api.EnvironmentSpec{Name: "x", UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/opt/../python"}}, "user_managed.interpreter_path"},
	} {
		err := Environment(tc.spec)
		if err == nil || api.FieldOf(err) != tc.field || api.CodeOf(err) != api.CodeInvalid {
			t.Errorf("%+v: got %v (field %q), want an invalid error on %s", tc.spec, err, api.FieldOf(err), tc.field)
		}
	}
}
