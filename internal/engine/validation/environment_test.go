package validation

import (
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestEnvironmentAcceptsGoodInputs(t *testing.T) {
	for _, spec := range []api.EnvironmentSpec{
		{Name: "train", Python: &api.PythonEnvironment{Requirements: []string{"numpy==1.26.4", "torch>=2,<3", "requests[socks] ~= 2.31", "pywin32; sys_platform == 'win32'"}, FindLinks: []string{"/srv/wheels", "https://example.org/wheels"}, IndexURL: "https://pypi.org/simple", Python: "python3.11"}},
		{Name: "bare", Python: &api.PythonEnvironment{}},
		{Name: "conda.x", UserManaged: &api.UserManagedEnvironment{InterpreterPath: "/opt/conda/envs/x/bin/python"}},
		{Name: "img", Container: &api.ContainerEnvironment{Image: "registry.example.com:5000/team/train:1.4"}},
		{Name: "short", Container: &api.ContainerEnvironment{Image: "python:3.11-slim"}},
		{Name: "pinned", Container: &api.ContainerEnvironment{Image: "ghcr.io/org/img@sha256:" + hex64}},
		{Name: "tar", Container: &api.ContainerEnvironment{ImageArchive: "images/train.tar", ImageDigest: "sha256:" + hex64, ImageSnapshot: hex64,
			Python: &api.PythonEnvironment{Requirements: []string{"mlctest==1.0"}, FindLinks: []string{"/srv/wheels"}}}},
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
		{api.EnvironmentSpec{Name: "x", Python: &api.PythonEnvironment{}, Container: &api.ContainerEnvironment{Image: "a:1"}}, "container"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{}}, "container"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{Image: "a:1", ImageArchive: "a.tar", ImageDigest: "sha256:" + hex64}}, "container.image_archive"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{Image: "Team/Train:1"}}, "container.image"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{Image: "train:1 --privileged"}}, "container.image"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{Image: "a:1", ImageDigest: "sha256:" + hex64}}, "container.image_digest"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{ImageArchive: "images/"}}, "container.image_archive"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{ImageArchive: "a.tar"}}, "container.image_digest"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{ImageArchive: "a.tar", ImageDigest: "sha256:" + hex64}}, "container.image_archive"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{ImageArchive: "a.tar", ImageDigest: "sha256:" + hex64, ImageSnapshot: "../x"}}, "container.image_archive"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{Image: "a:1", ImageSnapshot: hex64}}, "container.image_snapshot"},
		{api.EnvironmentSpec{Name: "x", Container: &api.ContainerEnvironment{Image: "a:1", Python: &api.PythonEnvironment{Requirements: []string{"numpy=1"}}}}, "container.python.requirements.0"},
	} {
		err := Environment(tc.spec)
		if err == nil || api.FieldOf(err) != tc.field || api.CodeOf(err) != api.CodeInvalid {
			t.Errorf("%+v: got %v (field %q), want an invalid error on %s", tc.spec, err, api.FieldOf(err), tc.field)
		}
	}
}
