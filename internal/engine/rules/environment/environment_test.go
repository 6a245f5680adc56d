package environment

import (
	"slices"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestNormaliseMakesEquivalentInputsOneHash(t *testing.T) {
	a := Normalise(&api.PythonEnvironment{Requirements: []string{"b==2", " a==1 ", "", "b==2"}, FindLinks: []string{"/w", "/w"}}, nil, nil)
	b := Normalise(&api.PythonEnvironment{Requirements: []string{"a==1", "b==2"}, FindLinks: []string{" /w"}, Python: "python3"}, nil, nil)
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
		"base":         Normalise(&base, nil, nil),
		"requirement":  Normalise(&api.PythonEnvironment{Requirements: []string{"a==2"}, FindLinks: []string{"/w"}}, nil, nil),
		"find_links":   Normalise(&api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/x"}}, nil, nil),
		"index_url":    Normalise(&api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/w"}, IndexURL: "http://i/simple"}, nil, nil),
		"python":       Normalise(&api.PythonEnvironment{Requirements: []string{"a==1"}, FindLinks: []string{"/w"}, Python: "python3.11"}, nil, nil),
		"user_managed": Normalise(nil, &api.UserManagedEnvironment{InterpreterPath: "/usr/bin/python3"}, nil),
		"image":        Normalise(nil, nil, &api.ContainerEnvironment{Image: "train:1"}),
		"other tag":    Normalise(nil, nil, &api.ContainerEnvironment{Image: "train:2"}),
		"archive":      Normalise(nil, nil, &api.ContainerEnvironment{ImageArchive: "a.tar", ImageDigest: "sha256:" + strings.Repeat("a", 64)}),
		"new archive":  Normalise(nil, nil, &api.ContainerEnvironment{ImageArchive: "a.tar", ImageDigest: "sha256:" + strings.Repeat("b", 64)}),
		"image+python": Normalise(nil, nil, &api.ContainerEnvironment{Image: "train:1", Python: &api.PythonEnvironment{Requirements: []string{"a==1"}}}),
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

func TestContainerHashCoversTheImageNotTheArchivePath(t *testing.T) {
	digest := "sha256:" + strings.Repeat("c", 64)
	here := Normalise(nil, nil, &api.ContainerEnvironment{ImageArchive: "images/a.tar", ImageDigest: digest})
	there := Normalise(nil, nil, &api.ContainerEnvironment{ImageArchive: "/srv/a.tar", ImageDigest: digest})
	uploaded := Normalise(nil, nil, &api.ContainerEnvironment{ImageArchive: "/srv/a.tar", ImageDigest: digest, ImageSnapshot: strings.Repeat("d", 64)})
	if ContentHash(here) != ContentHash(there) || ContentHash(here) != ContentHash(uploaded) {
		t.Fatal("one image at two paths, or uploaded, hashes differently")
	}
	if here.Container.ImageArchive != "images/a.tar" {
		t.Fatalf("the archive's path is not kept: %+v", *here.Container)
	}
	a := Normalise(nil, nil, &api.ContainerEnvironment{Image: " train:1", Python: &api.PythonEnvironment{Requirements: []string{"b==1", "a==1"}}})
	b := Normalise(nil, nil, &api.ContainerEnvironment{Image: "train:1", Python: &api.PythonEnvironment{Requirements: []string{"a==1", "b==1"}, Python: "python3"}})
	if ContentHash(a) != ContentHash(b) {
		t.Fatalf("equivalent container definitions hash differently: %+v vs %+v", *a.Container, *b.Container)
	}
}

func TestStepFor(t *testing.T) {
	py := Normalise(&api.PythonEnvironment{}, nil, nil)
	um := Normalise(nil, &api.UserManagedEnvironment{InterpreterPath: "/opt/py/bin/python"}, nil)
	ct := Normalise(nil, nil, &api.ContainerEnvironment{Image: "train:1"})
	if StepFor(nil) != None || StepFor(&py) != Build || StepFor(&um) != Check || StepFor(&ct) != InContainer {
		t.Fatal("wrong steps")
	}
	const noRuntime = "this engine has no containerd"
	if err := CannotRun("img", ct, noRuntime); err == nil || err.Error() != `environment "img" is a container environment, and `+noRuntime {
		t.Fatalf("a container environment where no runtime is: %v", err)
	}
	if err := CannotRun("img", ct, ""); err != nil {
		t.Fatalf("a container environment where a runtime is: %v", err)
	}
	onTop := Normalise(nil, nil, &api.ContainerEnvironment{Image: "train:1", Python: &api.PythonEnvironment{}})
	if step := StepFor(&onTop); step != BuildInContainer || !step.Builds() || !step.Containerised() || BuildPython(onTop) != onTop.Container.Python {
		t.Fatalf("python on top of an image: step %v", step)
	}
	if CannotRun("img", onTop, "") != nil || CannotRun("img", onTop, noRuntime) == nil {
		t.Fatal("python on top of an image needs a container runtime, and only that")
	}
	if Build.Containerised() || InContainer.Builds() || BuildPython(ct) != nil || BuildPython(py) != py.Python {
		t.Fatal("Build runs outside images, InContainer builds nothing")
	}
	if CannotRun("py", py, noRuntime) != nil || CannotRun("um", um, noRuntime) != nil {
		t.Fatal("python and user_managed environments are refused for want of a container runtime")
	}
	if InterpreterDir(*um.UserManaged) != "/opt/py/bin" {
		t.Fatal(InterpreterDir(*um.UserManaged))
	}
}

// An attached cluster's pods are of the environment's image: its reference, or for an
// archive the name it is imported under, one per content hash.
func TestPodImage(t *testing.T) {
	for _, tc := range []struct {
		def   Definition
		image string
	}{
		{Normalise(&api.PythonEnvironment{}, nil, nil), ""},
		{Normalise(nil, nil, &api.ContainerEnvironment{Image: "registry.example.com/train:1"}), "registry.example.com/train:1"},
		{Normalise(nil, nil, &api.ContainerEnvironment{Image: "train:2", Python: &api.PythonEnvironment{}}), "train:2"},
		{Normalise(nil, nil, &api.ContainerEnvironment{ImageArchive: "images/a.tar", ImageDigest: "sha256:" + strings.Repeat("c", 64)}), "mlcompute.local/env:h1"},
	} {
		if image := PodImage("h1", tc.def); image != tc.image {
			t.Errorf("PodImage(%+v) = %q; want %q", tc.def, image, tc.image)
		}
	}
}

// An imported image is unused once no hash in use names it.
func TestUnusedImages(t *testing.T) {
	got := UnusedImages([]string{"c", "a", "b", "a"}, []string{"b", "z"})
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("unused images %q; want a and c", got)
	}
	if got := UnusedImages([]string{"a"}, []string{"a"}); got != nil {
		t.Fatalf("an image in use is unused: %q", got)
	}
}
