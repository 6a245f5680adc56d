// Package environment is the environments rule of DESIGN 8: what an environment's
// definition is once normalised, its content hash (the key of every node's cached build),
// and what a node must do before a job's tasks start there: build (or reuse) a virtual
// environment, check a user's interpreter, or nothing.
//
// It is pure: inputs in, decision out, no store, no clock and no I/O.
package environment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// Definition is an environment's inputs, normalised: the same environment written two ways
// (requirements in another order, stray spaces, the default interpreter spelled out or not)
// is one Definition and so one content hash.
type Definition struct {
	Python      *api.PythonEnvironment      `json:"python,omitempty"`
	UserManaged *api.UserManagedEnvironment `json:"user_managed,omitempty"`
	Container   *Container                  `json:"container,omitempty"`
}

// Container is a container environment, normalised: the image reference or the archive's
// config digest, and the Python environment built on top.
type Container struct {
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
	// ImageArchive is where the archive was read from. It is kept for the node that needs the
	// archive, and is not hashed: the same image at another path is the same environment.
	ImageArchive string `json:"image_archive,omitempty"`
	// ImageSnapshot is the uploaded archive's snapshot, where nodes get it from; not hashed
	// either.
	ImageSnapshot string                 `json:"image_snapshot,omitempty"`
	Python        *api.PythonEnvironment `json:"python,omitempty"`
}

// Normalise returns the definition of an environment's inputs: requirements trimmed, without
// empty or repeated entries and sorted (pip resolves them together, so their order means
// nothing); find_links trimmed and without repeats, in their order; the interpreter defaulted
// to python3. A container's image reference is trimmed, and its python block normalised
// the same way.
func Normalise(py *api.PythonEnvironment, um *api.UserManagedEnvironment, c *api.ContainerEnvironment) Definition {
	d := Definition{Python: normalisePython(py)}
	if um != nil {
		d.UserManaged = &api.UserManagedEnvironment{InterpreterPath: path.Clean(strings.TrimSpace(um.InterpreterPath))}
	}
	if c != nil {
		d.Container = &Container{
			Image: strings.TrimSpace(c.Image), ImageDigest: c.ImageDigest, ImageArchive: c.ImageArchive,
			ImageSnapshot: c.ImageSnapshot, Python: normalisePython(c.Python),
		}
	}
	return d
}

func normalisePython(py *api.PythonEnvironment) *api.PythonEnvironment {
	if py == nil {
		return nil
	}
	{
		n := api.PythonEnvironment{IndexURL: strings.TrimSpace(py.IndexURL), Python: strings.TrimSpace(py.Python)}
		if n.Python == "" {
			n.Python = api.DefaultPython
		}
		for _, r := range py.Requirements {
			if r = strings.TrimSpace(r); r != "" {
				n.Requirements = append(n.Requirements, r)
			}
		}
		slices.Sort(n.Requirements)
		n.Requirements = slices.Compact(n.Requirements)
		for _, l := range py.FindLinks {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(n.FindLinks, l) {
				n.FindLinks = append(n.FindLinks, l)
			}
		}
		return &n
	}
}

// ContentHash is the hex SHA-256 of the definition's canonical JSON, prefixed by a version
// so that a future change of the build recipe can change every hash on purpose. A
// container's hash covers its image reference or its archive's config digest, not the
// archive's path.
func ContentHash(d Definition) string {
	if d.Container != nil {
		c := *d.Container
		c.ImageArchive, c.ImageSnapshot = "", ""
		d.Container = &c
	}
	raw, _ := json.Marshal(d) // fixed field order; sorted where order means nothing
	sum := sha256.Sum256(append([]byte("mlcompute-environment/v1\n"), raw...))
	return hex.EncodeToString(sum[:])
}

// CacheName is the name of a build's directory in a node's environment cache: the hash's
// first 16 hex digits (64 bits), short enough to keep scripts' "#!" lines well under the
// kernel's limit when the cache sits deep in a data dir.
func CacheName(hash string) string {
	if len(hash) > 16 {
		return hash[:16]
	}
	return hash
}

// Offline reports whether pip must run without an index: only find_links are given.
func Offline(py api.PythonEnvironment) bool {
	return py.IndexURL == "" && len(py.FindLinks) > 0
}

// PipArgs are the arguments of `python -m pip` that install py's requirements into the
// virtual environment being built; nil when there is nothing to install.
func PipArgs(py api.PythonEnvironment) []string {
	if len(py.Requirements) == 0 {
		return nil
	}
	args := []string{"install", "--disable-pip-version-check", "--no-input", "--no-cache-dir"}
	if Offline(py) {
		args = append(args, "--no-index")
	}
	if py.IndexURL != "" {
		args = append(args, "--index-url", py.IndexURL)
	}
	for _, l := range py.FindLinks {
		args = append(args, "--find-links", l)
	}
	return append(args, py.Requirements...)
}

// Step is what a node must do before a job's tasks start there.
type Step int

const (
	// None: the job names no environment; its tasks run with the node's PATH.
	None Step = iota
	// Build: make sure the environment's build is in the node's cache (build it, or wait
	// for the job building it, or find it there), then run with its bin dir first on PATH.
	Build
	// Check: make sure the user's interpreter exists, then run with its directory first
	// on PATH.
	Check
	// InContainer: run the job's tasks in the environment's image, which the node imports
	// or pulls itself when the first task starts there: nothing is prepared before. Only
	// targets with a container runtime take such jobs (CannotRun).
	InContainer
	// BuildInContainer: Build, in a container of the environment's image with the node's
	// cache mounted (the build is the image's python3's, once per content hash and
	// machine), then run the job's tasks in the image with the build first on PATH.
	BuildInContainer
)

// Containerised reports whether the step runs the job's tasks in an image.
func (s Step) Containerised() bool { return s == InContainer || s == BuildInContainer }

// Builds reports whether the step builds a Python environment (BuildPython says which).
func (s Step) Builds() bool { return s == Build || s == BuildInContainer }

// BuildPython is the Python environment a node builds for d: its own, or the one built on
// top of its image; nil when there is none.
func BuildPython(d Definition) *api.PythonEnvironment {
	if d.Python != nil {
		return d.Python
	}
	if d.Container != nil {
		return d.Container.Python
	}
	return nil
}

// StepFor decides what a node does for a job's environment.
func StepFor(d *Definition) Step {
	switch {
	case d == nil:
		return None
	case d.Python != nil:
		return Build
	case d.UserManaged != nil:
		return Check
	case d.Container != nil && d.Container.Python != nil:
		return BuildInContainer
	case d.Container != nil:
		return InContainer
	}
	return None
}

// CannotRun is why a job or deployment in environment name cannot run where it was sent,
// or nil when it can. noRuntime says why that target has no container runtime, or is ""
// when it has one: only a container environment needs one.
func CannotRun(name string, d Definition, noRuntime string) error {
	if StepFor(&d).Containerised() && noRuntime != "" {
		return fmt.Errorf("environment %q is a container environment, and %s", name, noRuntime)
	}
	return nil
}

// PodImage is the image the pods of a job in environment name (content hash hash) run on
// an attached Kubernetes cluster, which runs each of the job's ranks as a pod: the
// environment's image reference; for an image archive, the name the archive is imported
// under into the node's containerd (ArchiveImage); "" when it is not a container
// environment (the cluster's own image).
func PodImage(hash string, d Definition) string {
	if !StepFor(&d).Containerised() {
		return ""
	}
	if d.Container.ImageArchive != "" {
		return ArchiveImage(hash)
	}
	return d.Container.Image
}

// ArchiveImage is the name an environment's image archive is imported under into a
// machine's containerd: one per content hash, in a registry name no one pulls from.
func ArchiveImage(hash string) string {
	return "mlcompute.local/env:" + hash
}

// InterpreterDir is the directory that goes first on PATH for a user-managed environment.
func InterpreterDir(um api.UserManagedEnvironment) string {
	return path.Dir(um.InterpreterPath)
}
